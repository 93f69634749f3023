// Package rawio owns the raw system calls that move a bulk stream's bytes
// on Linux: read(2), write(2), writev(2) and splice(2) of a non-blocking
// descriptor by syscall.RawSyscall, for the WebSocket's TCP conn and a
// pipe conn's pipes (bytestream), a forward's TCP conns and a pipe joined
// to a TCP conn (bicopy), an SSH transport straight over TCP (sshlayer's
// server and client, through TCPConn), each called from a RawConn
// callback (Stream), which waits in the netpoller while the descriptor
// would block and keeps the conn's deadlines; and preadv2(2) with
// RWF_NOWAIT, which reads only what the page cache holds, for an upload's
// local source file (CachedReader), whose descriptor is never
// non-blocking.
//
// Why raw: a goroutine in syscall.Syscall gives up its P, and sysmon, the
// runtime's monitor thread, takes the P back from a call of more than 20
// µs while the process is busy and polls every 20 µs while it finds such
// calls. On loopback a write of a few hundred KiB runs the receiver's TCP
// work inline and takes longer, so a gateway, agent or client moving a
// bulk stream kept sysmon awake and its threads trading Ps: about 21
// context switches per MiB in each process, half of them sysmon's sleeps.
// A raw call keeps the P; on a non-blocking descriptor it never sleeps in
// the kernel, so holding the P for it is holding it for a copy of that
// many bytes. SFTP through the gateway on a 2-core machine, three
// alternating rounds of three 256 MiB runs each (bench/HISTORY.md, round
// 36): context switches per MiB in the gateway 22 to 8.5, the agent 22 to
// 14, the client 21 to 10; CPU per MiB downloaded, all three processes,
// 4.1 to 3.6 ms (medians), uploaded 4.6 to 3.95.
package rawio
