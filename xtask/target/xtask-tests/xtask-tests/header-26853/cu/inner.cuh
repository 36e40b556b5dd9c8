// changed
