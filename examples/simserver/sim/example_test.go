package sim_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/infergate/infergate/examples/simserver/sim"
	"github.com/infergate/infergate/proto/kservepb"
)

// ExampleNew embeds simserver in-process on a loopback port and lists its
// KServe models.
func ExampleNew() {
	srv, err := sim.New(sim.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	gs := grpc.NewServer(sim.ServerOptions()...)
	srv.RegisterGRPC(gs)
	go gs.Serve(srv.WrapListener(lis))
	defer gs.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	idx, err := kservepb.NewGRPCInferenceServiceClient(conn).RepositoryIndex(context.Background(), &kservepb.RepositoryIndexRequest{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range idx.Models {
		fmt.Println(m.Name, m.State)
	}
	// Output:
	// simple READY
	// resnet50 READY
	// mobilenet_v3 READY
	// identity_fp32 READY
	// llm_stream READY
}

// ExampleServer_SetFault makes resnet50 fail every request with UNAVAILABLE,
// as POST /api/v1/faults would.
func ExampleServer_SetFault() {
	srv, err := sim.New(sim.Config{SampleInterval: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	f, err := srv.SetFault(sim.Fault{Model: "resnet50", ErrorRate: 1, ErrorCode: "unavailable"})
	fmt.Println(f.Model, f.ErrorCode, f.Slowdown, err)
	_, err = srv.SetFault(sim.Fault{Model: "resnet50", ErrorRate: 2})
	fmt.Println(err)
	// Output:
	// resnet50 UNAVAILABLE 1 <nil>
	// sim: fault: error_rate: must be in [0,1], got 2
}
