module gonetguest

go 1.19
