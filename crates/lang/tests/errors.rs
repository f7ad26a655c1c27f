//! Error messages, word for word, with the caret under the culprit.

use netsift_lang::{Context, compile};
use netsift_wire::LinkType;

fn err(lt: LinkType, expr: &str) -> String {
    compile(expr, &Context::new(lt)).unwrap_err().to_string()
}

fn en(expr: &str) -> String {
    err(LinkType::ETHERNET, expr)
}

#[test]
fn lexical_and_syntax_errors() {
    assert_eq!(
        en("port 08"),
        "number 08 contains non-octal digit\n  port 08\n       ^^"
    );
    assert_eq!(
        en("host 4294967296"),
        "number 4294967296 overflows 32 bits\n  host 4294967296\n       ^^^^^^^^^^"
    );
    assert_eq!(
        en("ether host 1:2:3:4:5"),
        "bogus ethernet address 1:2:3:4:\n  ether host 1:2:3:4:5\n             ^^^^^^^^"
    );
    assert_eq!(
        en("tcp and @"),
        "unexpected character '@'\n  tcp and @\n          ^"
    );
    assert_eq!(
        en("tcp port"),
        "syntax error: unexpected end of expression\n  tcp port\n          ^"
    );
    assert_eq!(
        en("ip proto tcp"),
        "syntax error: unexpected 'tcp'\n  ip proto tcp\n           ^^^"
    );
    assert_eq!(
        en("(tcp or udp"),
        "syntax error: expected ')' before the end of the expression\n  (tcp or udp\n             ^"
    );
    assert_eq!(
        en("len-1 > 5"),
        "syntax error: unexpected 'len-1'\n  len-1 > 5\n  ^^^^^"
    );
}

#[test]
fn meaning_errors_point_at_the_value() {
    assert_eq!(
        en("tcp port htp"),
        "unknown port 'htp'\n  tcp port htp\n           ^^^"
    );
    assert_eq!(
        en("udp port ssh"),
        "port 'ssh' is tcp\n  udp port ssh\n           ^^^"
    );
    assert_eq!(
        en("port 70000"),
        "illegal port number 70000 > 65535\n  port 70000\n       ^^^^^"
    );
    assert_eq!(
        en("net 192.168/8"),
        "non-network bits set in \"192.168/8\"\n  net 192.168/8\n      ^^^^^^^^^"
    );
    assert_eq!(
        en("host 10.0.0.0/8"),
        "Mask syntax for networks only\n  host 10.0.0.0/8\n       ^^^^^^^^^^"
    );
    assert_eq!(
        en("tcp host 1.2.3.4"),
        "'tcp' modifier applied to host\n  tcp host 1.2.3.4\n           ^^^^^^^"
    );
    assert_eq!(
        en("vlan 5000"),
        "VLAN tag 5000 greater than maximum 4095\n  vlan 5000\n  ^^^^^^^^^"
    );
    assert_eq!(
        en("ip proto \\nosuch"),
        "unknown ip proto 'nosuch'\n  ip proto \\nosuch\n           ^^^^^^^"
    );
    assert_eq!(
        en("tcp[0:3] = 1"),
        "data size must be 1, 2, or 4\n  tcp[0:3] = 1\n  ^^^^^^^^"
    );
    assert_eq!(
        en("ip[0] / 0 = 1"),
        "division by zero\n  ip[0] / 0 = 1\n  ^^^^^^^^^"
    );
    assert_eq!(
        en("tcp port 80 and ip or 81"),
        "syntax error in filter expression: this value has no qualifier to inherit (write e.g. 'host', 'port' or 'net' before it)\n  tcp port 80 and ip or 81\n                        ^^"
    );
    assert_eq!(
        en("host nosuchhost.invalid"),
        "unknown host 'nosuchhost.invalid' (not in /etc/hosts; netsift asks the system resolver only with --resolve)\n  host nosuchhost.invalid\n       ^^^^^^^^^^^^^^^^^^"
    );
    assert_eq!(
        en("gateway router"),
        "'gateway' not supported in this configuration (libpcap 1.10 built with IPv6, netsift's reference, does not implement it)\n  gateway router\n          ^^^^^^"
    );
}

#[test]
fn link_type_errors() {
    assert_eq!(
        err(LinkType::RAW, "ether host 1:2:3:4:5:6"),
        "ethernet addresses supported only on ethernet/FDDI/token ring/802.11/ATM LANE/Fibre Channel\n  ether host 1:2:3:4:5:6\n             ^^^^^^^^^^^"
    );
    assert_eq!(
        err(LinkType::NULL, "vlan"),
        "no VLAN support for BSD loopback\n  vlan\n  ^^^^"
    );
    assert_eq!(
        err(LinkType::LINUX_SLL, "llc"),
        "'llc' not supported for Linux cooked v1\n  llc\n  ^^^"
    );
    assert_eq!(
        err(LinkType::USB_LINUX, "ip"),
        "USB link-layer type filtering not implemented\n  ip\n  ^^"
    );
    assert_eq!(
        err(LinkType(300), ""),
        "unknown data link type 300 (min 104, max 289)"
    );
    assert_eq!(
        err(LinkType::PPP, "vlan"),
        "no VLAN support for PPP\n  vlan\n  ^^^^"
    );
}
