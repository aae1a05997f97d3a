module gitarget

go 1.20
