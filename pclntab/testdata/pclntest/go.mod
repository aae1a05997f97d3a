module pclntest

go 1.20
