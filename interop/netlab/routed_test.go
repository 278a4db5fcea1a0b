package netlab

import (
	"fmt"
	"strings"
)

// routeNodes makes namespaces n<first> … n<n-1>, each joined by a veth
// (eth0 inside) to the router namespace sw, which routes between them:
// node i has scaleAddr(i) in a /48 of its own, and both ends of each link
// hold the other's MAC as a permanent neighbour entry (see the discovery
// lab's comment in scale_test.go for why). sw must forward IPv6. It
// returns the namespaces' full names.
func routeNodes(l *Lab, sw string, first, n int) []string {
	l.t.Helper()
	var names []string
	for i := first; i < n; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	nss := l.NS(names...)
	var rt strings.Builder
	for k, i := 0, first; i < n; k, i = k+1, i+1 {
		mac := fmt.Sprintf("02:aa:00:00:%02x:%02x", (i+1)>>8, (i+1)&0xff)
		fmt.Fprintf(&rt, "link add p%d address %s type veth peer name eth0 address %s netns %s\n", i, routerMAC, mac, nss[k])
		fmt.Fprintf(&rt, "link set p%d up\naddr add fe80::1/64 dev p%d nodad\n", i, i)
		fmt.Fprintf(&rt, "route add 2001:1ff:%x::/48 dev p%d\n", i+1, i)
		fmt.Fprintf(&rt, "neigh add %s lladdr %s dev p%d nud permanent\n", scaleAddr(i), mac, i)
	}
	l.IP(sw, rt.String())
	for k, i := 0, first; i < n; k, i = k+1, i+1 {
		l.IP(nss[k], fmt.Sprintf("addr add %s/48 dev eth0 nodad\nlink set eth0 up\n"+
			"neigh add fe80::1 lladdr %s dev eth0 nud permanent\nroute add default via fe80::1 dev eth0\n", scaleAddr(i), routerMAC))
	}
	return nss
}
