//! The iptables writers against the real tools, each run in a network namespace of its own
//! (`nsift-ipt-<pid>-<n>`, deleted on drop, also when the test fails):
//!
//! - `iptables-restore -c` loads what `Ruleset::to_restore` writes, and `iptables-save -c` gives
//!   back the same rule set (read with `iptables::parse`); for a rule set with every construct
//!   of the model and for ClassBench sets converted with `from_classbench`;
//! - `iptables-restore` rejects rule sets the reader rejects (a sample of the reader's errors);
//! - `nft -c -f` accepts, and `nft -f` loads, what `Ruleset::to_nft` writes, with every chain and
//!   rule in `nft list ruleset`;
//! - the kernel agrees with the evaluator: packets sent through `OUTPUT` (a raw socket in a
//!   namespace, out of a veth) leave on every rule exactly the count of packets the evaluator
//!   says match it there — for ClassBench sets and their traces, and for a rule set of jumps,
//!   gotos, returns and non-terminating targets.
//!
//! Needs root, iproute2, iptables and nftables (`apt-get install iptables nftables`); the
//! failure message says which is missing. The kernel test uses `netns::Lab` (its veth pair, and
//! the namespace removed on drop).

use std::io::Write as _;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use netsift_classify::iptables::{
    self, ConvertOptions, Counters, Packet, Policy, Ruleset, Step, Target,
};
use netsift_classify::{Header, classbench};
use netsift_testkit::netns::Lab;
use netsift_testkit::{data, rng::Rng};

/// Fails, saying what to install, when a tool the tests need cannot run.
fn require_tools() {
    for tool in ["iptables-restore", "iptables-save", "nft"] {
        if let Err(e) = Command::new(tool).arg("--version").output() {
            panic!(
                "`{tool}` cannot run ({e}): install the iptables and nftables packages \
                 (`apt-get install iptables nftables`) — this test checks \
                 netsift's iptables and nft writers against the real tools"
            );
        }
    }
}

/// A network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        require_tools();
        let name = format!(
            "nsift-ipt-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap_or_else(|e| panic!("cannot run `ip` (install iproute2): {e}"));
        assert!(
            out.status.success(),
            "`ip netns add {name}` failed: {} (this test needs root)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Netns(name)
    }

    /// Runs `program args…` in the namespace with `input` on its standard input.
    fn run(&self, program: &str, args: &[&str], input: &str) -> Output {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.0, program])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run `ip netns exec {} {program}`: {e}", self.0));
        if let Some(mut stdin) = child.stdin.take() {
            // A tool that fails early may close its input: its status says what happened.
            let _ = stdin.write_all(input.as_bytes());
        }
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// Runs `program args…` and returns its standard output; panics with its error output when
    /// it fails.
    fn ok(&self, program: &str, args: &[&str], input: &str, what: &str) -> String {
        let out = self.run(program, args, input);
        assert!(
            out.status.success(),
            "{what}: `{program} {}` failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A rule set with every construct of the model, in the forms `iptables-save` writes.
const EVERYTHING: &str = r#"*filter
:INPUT DROP [10:2000]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:web - [0:0]
:log-and-drop - [0:0]
[5:300] -A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT ! -s 10.0.0.0/255.0.255.0 -p tcp -m tcp --dport 22 -j ACCEPT
-A INPUT -s 10.0.0.0/8 ! -d 10.1.0.0/16 -p tcp -m tcp ! --sport 1000:2000 --dport 80:65535 -j web
-A INPUT -p udp -m multiport --dports 53,123,1000:2000 -m comment --comment "dns \"and\" ntp" -j ACCEPT
-A INPUT -p udp -m multiport ! --sports 1:1023 -j ACCEPT
-A INPUT -p tcp -m multiport --ports 7,9:10 -j DROP
-A INPUT -m iprange --src-range 1.2.3.4-1.2.3.9 ! --dst-range 5.5.5.5-5.5.5.7 -j DROP
-A INPUT -p tcp -m tcp --tcp-flags SYN,ACK SYN -j LOG --log-prefix "syn: "
-A INPUT -p tcp -m tcp ! --tcp-flags FIN,SYN,RST,ACK SYN -j REJECT --reject-with tcp-reset
-A INPUT -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A INPUT -p icmp -m icmp ! --icmp-type 3/1 -j ACCEPT
-A INPUT -p icmp -j REJECT --reject-with icmp-host-prohibited
-A INPUT -s 192.168.0.0/16 -f -j DROP
-A INPUT -p udp -m udp --sport 53 -m comment --comment cb7
-A INPUT -p tcp -m tcp --sport 0:1023 -g web
-A INPUT -j log-and-drop
-A FORWARD -i eth+ -o eth1 ! -p gre -j MARK --set-xmark 0x5/0xffffffff
-A OUTPUT ! -o lo -p tcp -m tcp --dport 25 -j REJECT --reject-with icmp-port-unreachable
-A web -p tcp -m tcp --dport 80 -j NFQUEUE --queue-num 3
-A web -m comment --comment "back to the caller" -j RETURN
-A log-and-drop -j LOG --log-prefix "dropped: " --log-level 6
-A log-and-drop -j DROP
COMMIT
"#;

/// The rule set as `iptables-save` writes it back, and as we compare: user chains in name order
/// (as `iptables-save` lists them), no counters (user chains have none in iptables-nft), a bare
/// `REJECT` with its default type written out.
fn normalized(mut rs: Ruleset) -> Ruleset {
    rs.chains[3..].sort_by(|a, b| a.name.cmp(&b.name));
    for c in &mut rs.chains {
        c.counters = Counters::default();
        for r in &mut c.rules {
            r.counters = None;
            if r.target == Target::Reject(None) {
                r.target = Target::Reject(Some("icmp-port-unreachable".into()));
            }
        }
    }
    rs
}

/// Loads `rs` with `iptables-restore -c` and reads it back with `iptables-save -c`.
fn through_iptables(rs: &Ruleset, what: &str) -> Ruleset {
    let ns = Netns::new();
    let text = rs.to_restore();
    ns.ok("iptables-restore", &["-c"], &text, what);
    let saved = ns.ok("iptables-save", &["-c", "-t", "filter"], "", what);
    iptables::parse(&saved).unwrap_or_else(|e| panic!("{what}: {}", e.snippet(&saved)))
}

fn classbench_sets() -> Vec<(String, Ruleset)> {
    let root = data::dir().join("classbench/ehzuf-HyperSplit/rules");
    ["acl1_1K", "fw1_1K", "ipc1_1K"]
        .iter()
        .map(|set| {
            let text =
                std::fs::read_to_string(root.join(set)).unwrap_or_else(|e| panic!("{set}: {e}"));
            let rules = classbench::parse_rules(&text).unwrap_or_else(|e| panic!("{set}: {e}"));
            let c = iptables::from_classbench(&rules, &ConvertOptions::default());
            assert!(c.inexact.is_empty(), "{set}: {:?}", c.inexact);
            (set.to_string(), c.ruleset)
        })
        .collect()
}

#[test]
fn iptables_restore_loads_what_we_write_and_saves_it_back() {
    let rs = iptables::parse(EVERYTHING).unwrap_or_else(|e| panic!("{}", e.snippet(EVERYTHING)));
    let back = through_iptables(&rs, "every construct");
    // Counters of built-in chains and rules survive `-c`.
    assert_eq!(back.chains[0].counters, rs.chains[0].counters);
    assert_eq!(
        back.chains[0].rules[0].counters,
        rs.chains[0].rules[0].counters
    );
    assert_eq!(
        normalized(back.clone()),
        normalized(rs.clone()),
        "every construct:\n{}",
        back.to_restore()
    );
    for (set, rs) in classbench_sets() {
        let back = through_iptables(&rs, &set);
        assert_eq!(normalized(back), normalized(rs.clone()), "{set}");
        println!(
            "{set}: {} rules loaded by iptables-restore and saved back unchanged",
            rs.chains[1].rules.len()
        );
    }
}

#[test]
fn iptables_restore_rejects_what_the_reader_rejects() {
    let ns = Netns::new();
    let prologue = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:a - [0:0]\n:b - [0:0]\n";
    let bad = [
        "-A INPUT -p tcp -m tcp --dport 2000:1000 -j ACCEPT",
        "-A INPUT -p tcp -m tcp --dport 99999 -j ACCEPT",
        "-A INPUT -o eth0 -j ACCEPT",
        "-A OUTPUT -i eth0 -j ACCEPT",
        "-A INPUT -j nowhere",
        "-A nowhere -j ACCEPT",
        "-A INPUT -p udp -j REJECT --reject-with tcp-reset",
        "-A INPUT -p udp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 -j ACCEPT",
        "-A INPUT -m tcp --dport 22 -j ACCEPT",
        "-A INPUT -s 1.2.3.4 -s 1.2.3.5 -j ACCEPT",
        "-A INPUT ! -p all -j ACCEPT",
        ":abcdefghijabcdefghijabcdefghij - [0:0]",
        "-A INPUT -j a\n-A a -j b\n-A b -j a",
    ];
    for rule in bad {
        let text = format!("{prologue}{rule}\nCOMMIT\n");
        let ours = iptables::parse(&text);
        assert!(ours.is_err(), "the reader takes `{rule}`");
        let out = ns.run("iptables-restore", &["--test"], &text);
        let out = if out.status.success() {
            // Some checks happen only when the kernel gets the rules.
            ns.run("iptables-restore", &[], &text)
        } else {
            out
        };
        assert!(
            !out.status.success(),
            "iptables-restore takes `{rule}`, which the reader rejects: {}",
            ours.unwrap_err()
        );
    }
}

#[test]
fn nft_loads_what_we_write() {
    // nf_tables has no NFQUEUE module everywhere: leave it out of the nft check.
    // nft strings cannot hold `"`.
    let text = EVERYTHING
        .replace(" -j NFQUEUE --queue-num 3", " -j ACCEPT")
        .replace(r#""dns \"and\" ntp""#, r#""dns and ntp""#);
    let mut sets = vec![(
        "every construct".to_string(),
        iptables::parse(&text).unwrap(),
    )];
    sets.extend(classbench_sets());
    for (set, rs) in sets {
        let nft = rs
            .to_nft()
            .unwrap_or_else(|e| panic!("{set}: no nft translation: {e}"));
        let ns = Netns::new();
        ns.ok("nft", &["-c", "-f", "-"], &nft, &format!("{set} (nft -c)"));
        ns.ok("nft", &["-f", "-"], &nft, &format!("{set} (nft -f)"));
        let listed = ns.ok("nft", &["list", "ruleset"], "", &set);
        for c in &rs.chains {
            assert!(
                listed.contains(&format!("chain {} {{", c.name)),
                "{set}: chain {} missing:\n{listed}",
                c.name
            );
        }
        let rules: usize = rs.chains.iter().map(|c| c.rules.len()).sum();
        let counters = listed.matches(" counter packets ").count()
            + listed
                .lines()
                .filter(|l| l.trim_start().starts_with("counter packets"))
                .count();
        assert_eq!(counters, rules, "{set}: rules loaded\n{listed}");
        println!("{set}: {rules} rules loaded by nft");
    }
}

/// An IPv4 packet with header `h` (TCP with `flags`, UDP, or 8 zero bytes for other protocols).
fn ipv4_packet(h: &Header, flags: u8) -> Vec<u8> {
    let [sa, da, sp, dp, proto] = h.0;
    let ports = |v: &mut Vec<u8>| {
        v.extend_from_slice(&(sp as u16).to_be_bytes());
        v.extend_from_slice(&(dp as u16).to_be_bytes());
    };
    let mut l4 = Vec::new();
    match proto {
        6 => {
            ports(&mut l4);
            l4.extend_from_slice(&[0; 8]);
            l4.extend_from_slice(&[5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
        }
        17 => {
            ports(&mut l4);
            l4.extend_from_slice(&[0, 8, 0, 0]);
        }
        _ => l4.extend_from_slice(&[0; 8]),
    }
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto as u8, 0, 0];
    p[2..4].copy_from_slice(&(20 + l4.len() as u16).to_be_bytes());
    p.extend_from_slice(&sa.to_be_bytes());
    p.extend_from_slice(&da.to_be_bytes());
    p.extend(l4);
    p
}

/// Addresses the kernel would not send as they are (it fills in a 0.0.0.0 source; loopback,
/// multicast and broadcast destinations take other paths) or that are the namespace's own
/// (198.19.254.0/23).
fn sendable(h: &Header) -> bool {
    let odd = |a: u32| matches!(a >> 24, 0 | 127 | 224..) || a >> 9 == 0xc613_fe00 >> 9;
    !odd(h.0[0]) && !odd(h.0[1])
}

/// Loads `rs` into a fresh namespace, sends every packet out of its veth through `OUTPUT`, and
/// compares each rule's packet counter with the packets the evaluator says match the rule.
fn kernel_agrees(rs: &Ruleset, packets: &[(Header, u8)], what: &str) {
    require_tools();
    let lab = Lab::new().unwrap_or_else(|e| panic!("{what}: {e}"));
    lab.ip(&["link", "set", "lo", "up"]).unwrap();
    // Out of the veth to a gateway with a permanent neighbour entry (a made-up MAC address, so
    // the other end drops the frames as not its own): no address resolution that could fail and
    // make the kernel send ICMP errors of its own through OUTPUT.
    for args in [
        &["addr", "add", "198.19.254.1/24", "dev", &lab.a][..],
        &[
            "neigh",
            "add",
            "198.19.254.9",
            "lladdr",
            "02:00:00:00:00:09",
            "dev",
            &lab.a,
            "nud",
            "permanent",
        ],
        &[
            "route",
            "add",
            "default",
            "via",
            "198.19.254.9",
            "dev",
            &lab.a,
        ],
    ] {
        lab.ip(args).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let mut child = lab
        .command("iptables-restore")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: iptables-restore: {e}"));
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(rs.to_restore().as_bytes());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what}: iptables-restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lab.run(|| {
        // SAFETY: plain socket calls on a descriptor this closure owns and closes; the buffers
        // outlive the calls.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW);
            assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
            for (h, flags) in packets {
                let bytes = ipv4_packet(h, *flags);
                let mut to: libc::sockaddr_in = std::mem::zeroed();
                to.sin_family = libc::AF_INET as libc::sa_family_t;
                to.sin_addr.s_addr = h.0[1].to_be();
                // Dropped and rejected packets fail with EPERM: they were counted all the same.
                libc::sendto(
                    fd,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    0,
                    (&to as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                );
            }
            libc::close(fd);
        }
    });
    let saved = lab.exec(&["iptables-save", "-c", "-t", "filter"]).unwrap();
    let kernel =
        iptables::parse(&saved).unwrap_or_else(|e| panic!("{what}: {}", e.snippet(&saved)));
    // What the evaluator predicts, rule by rule (by chain name: iptables-save sorts user chains).
    let ev = rs.evaluator().unwrap();
    let mut want: std::collections::HashMap<(String, usize), u64> = Default::default();
    for (h, flags) in packets {
        let p = Packet::new(*h)
            .with_tcp_flags(*flags)
            .with_ifaces("", &lab.a);
        let e = ev.evaluate("OUTPUT", &p).unwrap();
        for Step { chain, rule } in e.path {
            let r = &rs.chains[chain].rules[rule];
            if r.matches(&p, &mut |_, _| false) {
                *want
                    .entry((rs.chains[chain].name.clone(), rule))
                    .or_default() += 1;
            }
        }
    }
    let mut wrong = Vec::new();
    let mut counted = 0;
    for c in &kernel.chains {
        for (i, r) in c.rules.iter().enumerate() {
            let got = r.counters.map_or(0, |k| k.packets);
            let exp = want.get(&(c.name.clone(), i)).copied().unwrap_or(0);
            counted += got;
            if got != exp {
                wrong.push(format!(
                    "rule {} of {} (`{r}`): kernel {got}, evaluator {exp}",
                    i + 1,
                    c.name
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{what}: {} rules disagree:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    println!(
        "{what}: {} packets, {counted} rule matches counted by the kernel, all as predicted",
        packets.len()
    );
}

#[test]
fn kernel_counts_what_the_evaluator_predicts() {
    let root = data::dir().join("classbench/ehzuf-HyperSplit");
    for set in ["acl1_1K", "fw1_1K", "ipc1_1K"] {
        let rules = std::fs::read_to_string(root.join("rules").join(set)).unwrap();
        let rules = classbench::parse_rules(&rules).unwrap();
        let trace =
            std::fs::read_to_string(root.join("traces").join(format!("{set}_trace"))).unwrap();
        let trace = classbench::parse_trace(&trace).unwrap();
        let opts = ConvertOptions {
            chain: "OUTPUT".into(),
            policy: Policy::Accept,
            ..ConvertOptions::default()
        };
        let c = iptables::from_classbench(&rules, &opts);
        let packets: Vec<(Header, u8)> = trace
            .iter()
            .map(|t| (t.header, 0))
            .filter(|(h, _)| sendable(h))
            .take(3000)
            .collect();
        assert!(
            packets.len() > 1000,
            "{set}: {} sendable headers",
            packets.len()
        );
        kernel_agrees(&c.ruleset, &packets, set);
    }
    // Chain semantics: jumps, gotos, returns, policies, non-terminating targets, negations.
    let rs = iptables::parse(
        r#"*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT DROP [0:0]
:a - [0:0]
:b - [0:0]
:c - [0:0]
-A OUTPUT -s 10.0.0.0/8 -j a
-A OUTPUT -p tcp -m tcp --tcp-flags SYN,ACK SYN -j LOG --log-prefix "syn "
-A OUTPUT -s 11.0.0.0/8 -g b
-A OUTPUT -p udp -m multiport --dports 53,1000:2000 -j c
-A OUTPUT -m iprange --dst-range 20.0.0.0-20.0.0.127 -j DROP
-A OUTPUT -p tcp -m multiport ! --ports 22,80 -j MARK --set-xmark 0x2/0xffffffff
-A OUTPUT ! -o nsa -j DROP
-A OUTPUT -p tcp -m tcp --dport 80 -j ACCEPT
-A OUTPUT -p icmp -j ACCEPT
-A a -p tcp -m tcp --dport 22 -j DROP
-A a -p tcp -m tcp --dport 23 -g b
-A a -p tcp -m tcp --dport 24 -j RETURN
-A a -j c
-A a -p tcp -m tcp ! --syn -j ACCEPT
-A b -p tcp -m tcp --sport 1:1000 -j ACCEPT
-A b -p udp -j RETURN
-A b -m comment --comment counts
-A c -d 30.0.0.0/8 -j DROP
-A c -p udp -m udp --sport 7 -j RETURN
-A c ! -d 40.0.0.0/8 -j MARK --set-xmark 0x1/0xffffffff
COMMIT
"#,
    )
    .unwrap();
    let mut rng = Rng::new(7);
    let mut packets = Vec::new();
    for _ in 0..3000 {
        let pick = |rng: &mut Rng, v: &[u32]| v[rng.below(v.len() as u64) as usize];
        let h = Header(
            [
                pick(&mut rng, &[10, 11, 12]) << 24 | rng.below(256) as u32,
                pick(&mut rng, &[20, 30, 40]) << 24 | rng.below(256) as u32,
                pick(&mut rng, &[1, 7, 22, 999, 1001, 40000]),
                pick(&mut rng, &[22, 23, 24, 53, 80, 1500, 3000]),
                pick(&mut rng, &[6, 6, 17, 17, 1]),
            ],
            0,
        );
        packets.push((h, [0x02, 0x12, 0x10, 0x01][rng.below(4) as usize]));
    }
    kernel_agrees(&rs, &packets, "chain semantics");
}
