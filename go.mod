module github.com/proxgen/proxgen

go 1.24
