module goguest

go 1.19
