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
)

// bufferPool serves both sides of every proxied call (see dirtyPool).
var bufferPool = newDirtyPool()
