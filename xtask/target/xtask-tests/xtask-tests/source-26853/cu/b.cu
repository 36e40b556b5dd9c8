B changed
