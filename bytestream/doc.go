// Package bytestream turns the transports hostgate runs over — TCP, WebSocket
// (client and server side), a pair of pipes such as this process's stdio or a
// docker exec attachment — into net.Conn streams, and multiplexes any of them
// with yamux (MuxClient, MuxServer).
//
// What each stream supports:
//
//	stream        deadlines                  half-close (CloseWrite)
//	TCP           yes                        yes (*net.TCPConn)
//	WebSocket     yes                        no: WebSocket has none; Close ends both directions
//	NewPipeConn   when r/w support them      yes: closes the writer (a socket's shut down first)
//	Stdio         when fds 0/1 are pipes     yes: closes fd 1 (a socket's shut down first)
//	              or sockets
//
// Library code: nothing here logs; errors carry the detail.
package bytestream
