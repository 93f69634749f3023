module github.com/pkg/sftp

go 1.25.0

require (
	github.com/kr/fs v0.1.0
	golang.org/x/crypto v0.54.0
	golang.org/x/sys v0.47.0
)
