package correlate

import (
	"net/netip"

	"github.com/kwire/kwire/capture"
)

// connNames keeps the text forms of the endpoints of recent connections:
// formatting an address allocates, and nearly every exchange needs them
// (client keys, commit records, evidence). Direct-mapped by connection ID;
// an entry is checked against the endpoints, which a Swap may change.
type connNames struct {
	slots [256]connName
}

type connName struct {
	id             uint64
	client, server netip.AddrPort
	set            bool
	conn           Conn   // ID, Client and Broker (no process)
	host           string // the client address, without port
}

// of returns the names of c's endpoints.
func (n *connNames) of(c *capture.Conn) *connName {
	s := &n.slots[c.ID%uint64(len(n.slots))]
	if !s.set || s.id != c.ID || s.client != c.Client || s.server != c.Server {
		*s = connName{id: c.ID, client: c.Client, server: c.Server, set: true,
			conn: Conn{ID: c.ID, Client: c.Client.String(), Broker: c.Server.String()},
			host: c.Client.Addr().Unmap().String()}
	}
	return s
}
