module github.com/augur-hpc/augur

go 1.26.8

require (
	github.com/hanwen/go-fuse/v2 v2.12.1 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
