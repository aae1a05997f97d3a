module layoutprobe

go 1.20
