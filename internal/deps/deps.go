package deps

import (
	_ "github.com/coder/websocket"
	_ "github.com/docker/docker/client"
	_ "github.com/hashicorp/yamux"
	_ "github.com/pkg/sftp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.uber.org/goleak"
	_ "golang.org/x/crypto/ssh"
	_ "modernc.org/sqlite"
)
