package proxy

// HTTP/2 transport sizing on both sides of the proxy. Tensors are large:
// with gRPC's defaults (64 KiB windows grown by BDP probing, 32 KiB
// buffers) a 1 MiB request costs many WINDOW_UPDATE round trips and small
// syscalls per hop, and the proxy makes two hops where a direct client
// makes one.
const (
	transportWindow     = 4 << 20  // per stream
	transportConnWindow = 16 << 20 // per connection
	transportBuffer     = 256 << 10
	// serverStreamWindow is what a client may send on a stream of the
	// proxy's grpc.Server before the proxy reads it: grpc-go grants more
	// only as the call reads, so a call waiting for the byte budget
	// (Budget.Admit) holds back its sender at this much. 4 MiB there let
	// 100 waiting 4 MiB uploads land whole in grpc-go's buffers (534 MiB
	// peak RSS); 64 KiB, grpc-go's least, keeps it to 64 KiB a stream.
	serverStreamWindow = 64 << 10
)

// bufferPool serves both sides of every proxied call (see dirtyPool).
var bufferPool = newDirtyPool()
