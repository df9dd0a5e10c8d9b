package monitor

// codeNames lists the gRPC code names in codes.Code order, so that a code's
// request counter is an array slot instead of a map entry on the hot path.
var codeNames = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded",
	"NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted",
	"FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented",
	"Internal", "Unavailable", "DataLoss", "Unauthenticated",
}

const numCodes = len(codeNames)

// codeIndex returns the slot of a gRPC code name, or -1 for a name outside
// the table. An empty name counts as "Unknown": a call without a status is
// not a success. The switch compiles to a length-then-compare search and
// hashes nothing.
func codeIndex(code string) int {
	switch code {
	case "OK":
		return 0
	case "Canceled":
		return 1
	case "Unknown", "":
		return 2
	case "InvalidArgument":
		return 3
	case "DeadlineExceeded":
		return 4
	case "NotFound":
		return 5
	case "AlreadyExists":
		return 6
	case "PermissionDenied":
		return 7
	case "ResourceExhausted":
		return 8
	case "FailedPrecondition":
		return 9
	case "Aborted":
		return 10
	case "OutOfRange":
		return 11
	case "Unimplemented":
		return 12
	case "Internal":
		return 13
	case "Unavailable":
		return 14
	case "DataLoss":
		return 15
	case "Unauthenticated":
		return 16
	}
	return -1
}
