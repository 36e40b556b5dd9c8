// inner
