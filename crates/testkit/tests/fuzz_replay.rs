//! Replay the fuzz targets' inputs as ordinary tests, so stable CI covers them without nightly:
//! seeds built from the shared captures, the local corpus (`fuzz/corpus/<target>/`, if a fuzz run
//! left one), and every crash ever found (`fuzz/regressions/<target>/`, committed).

use std::fs;
use std::path::{Path, PathBuf};

use netsift_bpf::asm;
use netsift_testkit::{data, fuzz, oracle, rng::Rng};

fn stored_inputs(target: &str) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for sub in ["corpus", "regressions"] {
        let d: PathBuf = root.join(sub).join(target);
        if let Ok(entries) = fs::read_dir(&d) {
            for e in entries.flatten() {
                if let Ok(bytes) = fs::read(e.path()) {
                    out.push(bytes);
                }
            }
        }
    }
    out
}

#[test]
fn capture_read_on_every_capture_and_its_truncations() {
    let mut rng = Rng::new(1);
    let mut n = 0;
    for path in data::tcpdump_captures()
        .iter()
        .chain(&data::libpcap_captures())
    {
        let bytes = fs::read(path).unwrap();
        fuzz::capture_read(&bytes);
        // A few truncation points and byte flips per file.
        for _ in 0..4 {
            let cut = rng.below(bytes.len() as u64 + 1) as usize;
            fuzz::capture_read(&bytes[..cut]);
            let mut flipped = bytes.clone();
            if !flipped.is_empty() {
                let at = rng.below(flipped.len() as u64) as usize;
                flipped[at] ^= 1 << rng.below(8);
                fuzz::capture_read(&flipped);
            }
            n += 2;
        }
        n += 1;
    }
    for input in stored_inputs("capture_read") {
        fuzz::capture_read(&input);
        n += 1;
    }
    println!("capture_read: {n} inputs");
}

#[test]
fn bpf_text_on_libpcap_dumps_and_mutations() {
    let mut rng = Rng::new(2);
    let mut n = 0;
    for expr in [
        "ip",
        "tcp port 80",
        "ip6 protochain 6",
        "vlan and udp",
        "len > 100",
    ] {
        let program = oracle::compile(1, 262_144, expr, true).unwrap();
        for format in [asm::Format::Asm, asm::Format::C, asm::Format::Decimal] {
            let text = asm::dump(&program, format).into_bytes();
            fuzz::bpf_text(&text);
            for _ in 0..200 {
                let mut m = text.clone();
                let at = rng.below(m.len() as u64) as usize;
                m[at] = *rng.pick(b" ,x#[]()0123456789abcdefjtMk-+\n\t{}");
                fuzz::bpf_text(&m);
                fuzz::bpf_text(&m[..at]);
                n += 2;
            }
        }
    }
    for input in stored_inputs("bpf_text") {
        fuzz::bpf_text(&input);
        n += 1;
    }
    println!("bpf_text: {n} inputs");
}

#[test]
fn bpf_run_on_random_and_stored_inputs() {
    let mut rng = Rng::new(3);
    for _ in 0..20_000 {
        let len = rng.below(200) as usize;
        fuzz::bpf_run(&rng.bytes(len));
    }
    for input in stored_inputs("bpf_run") {
        fuzz::bpf_run(&input);
    }
}

#[test]
fn jit_vs_interp_on_random_and_stored_inputs() {
    let mut rng = Rng::new(5);
    for _ in 0..20_000 {
        let len = rng.below(200) as usize;
        fuzz::jit_vs_interp(&rng.bytes(len));
    }
    for input in stored_inputs("bpf_run")
        .into_iter()
        .chain(stored_inputs("jit_vs_interp"))
    {
        fuzz::jit_vs_interp(&input);
    }
}

#[test]
fn ebpf_vs_interp_on_random_and_stored_inputs() {
    let mut rng = Rng::new(17);
    for _ in 0..2_000 {
        let len = rng.below(200) as usize;
        fuzz::ebpf_vs_interp(&rng.bytes(len));
    }
    for input in stored_inputs("jit_vs_interp")
        .into_iter()
        .chain(stored_inputs("ebpf_vs_interp"))
    {
        fuzz::ebpf_vs_interp(&input);
    }
}

#[test]
fn lang_targets_on_libpcap_expressions_and_mutations() {
    let mut rng = Rng::new(4);
    let mut exprs: Vec<String> = Vec::new();
    for table in ["accept.tsv", "reject.tsv", "apply.tsv"] {
        for r in data::libpcap_table(table) {
            exprs.push(r.get("expr").to_string());
        }
    }
    exprs.sort();
    exprs.dedup();
    let mut n = 0;
    for e in &exprs {
        fuzz::lang_compile(e.as_bytes());
        fuzz::lang_vs_libpcap(e.as_bytes());
        fuzz::swift_vs_interp(e.as_bytes());
        let mut m = e.clone().into_bytes();
        if !m.is_empty() {
            let at = rng.below(m.len() as u64) as usize;
            m[at] = *rng.pick(b" ()[]&|!=<>-+*/%^:0123456789abcdefx.andortcpip");
            fuzz::lang_compile(&m);
            fuzz::lang_vs_libpcap(&m);
            fuzz::swift_vs_interp(&m);
            fuzz::lang_compile(&m[..at]);
            fuzz::lang_vs_libpcap(&m[..at]);
        }
        n += 5;
    }
    for target in ["lang_compile", "lang_vs_libpcap", "swift_vs_interp"] {
        for input in stored_inputs(target) {
            fuzz::lang_compile(&input);
            fuzz::lang_vs_libpcap(&input);
            fuzz::swift_vs_interp(&input);
            n += 1;
        }
    }
    println!("lang targets: {n} inputs");
}

/// How an FTP session of [`ftp_frames`] announces its data connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Announce {
    /// `PASV`, answered `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)`.
    Pasv,
    /// `EPSV`, answered `229 Entering Extended Passive Mode (|||port|)`.
    Epsv,
    /// The client's `PORT h1,h2,h3,h4,p1,p2`.
    Port,
    /// The client's `EPRT |1|a.b.c.d|port|`.
    Eprt,
}

/// FTP traffic for the `ftpcap_tracker` seeds: `sessions` control connections, each announcing
/// one data connection in turn with PASV/227, EPSV/229, PORT and EPRT, the data connections
/// opened (handshake, a few segments) and closed (FINs both ways and the last ACK, or a RST),
/// overlapping in time, with the capture crate's mix as background. Frames in time order.
fn ftp_frames(sessions: u8) -> Vec<Vec<u8>> {
    use netsift_capture::generate::{
        FrameBuilder, TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN, mixed_traffic,
    };
    const KINDS: [Announce; 4] = [
        Announce::Pasv,
        Announce::Epsv,
        Announce::Port,
        Announce::Eprt,
    ];
    // (time, sequence, frame): session k's frames start at time 4k, one step apart.
    let mut timed: Vec<(u32, usize, Vec<u8>)> = Vec::new();
    for k in 0..sessions {
        let kind = KINDS[usize::from(k) % KINDS.len()];
        let server = [198, 18, 10, 1 + k % 2];
        let client = [198, 18, 20, 1 + k];
        let (smac, cmac) = ([2, 0, 0, 10, 0, server[3]], [2, 0, 0, 20, 0, client[3]]);
        let ctrl_port = 40_000 + u16::from(k);
        let data_port = 50_000 + 257 * u16::from(k);
        let c2s = |sport, dport, flags| {
            FrameBuilder::new()
                .src_mac(cmac)
                .dst_mac(smac)
                .ipv4(client, server)
                .tcp(sport, dport, flags)
        };
        let s2c = |sport, dport, flags| {
            FrameBuilder::new()
                .src_mac(smac)
                .dst_mac(cmac)
                .ipv4(server, client)
                .tcp(sport, dport, flags)
        };
        let (h, l) = (data_port >> 8, data_port & 0xff);
        let [a, b, c, d] = client;
        let mut frames = Vec::new();
        // The announcement, and the data connection's ends: (client port, server port), the
        // client's end opening it in passive mode, the server's (port 20) in active mode.
        let (from_client, client_port, server_port) = match kind {
            Announce::Pasv | Announce::Epsv => {
                let (cmd, reply) = if kind == Announce::Pasv {
                    let [w, x, y, z] = server;
                    (
                        "PASV\r\n".to_string(),
                        format!("227 Entering Passive Mode ({w},{x},{y},{z},{h},{l}).\r\n"),
                    )
                } else {
                    (
                        "EPSV\r\n".to_string(),
                        format!("229 Entering Extended Passive Mode (|||{data_port}|)\r\n"),
                    )
                };
                frames.push(c2s(ctrl_port, 21, TCP_PSH | TCP_ACK).payload(cmd.as_bytes()));
                frames.push(s2c(21, ctrl_port, TCP_PSH | TCP_ACK).payload(reply.as_bytes()));
                (true, 30_000 + u16::from(k), data_port)
            }
            Announce::Port | Announce::Eprt => {
                let cmd = if kind == Announce::Port {
                    format!("PORT {a},{b},{c},{d},{h},{l}\r\n")
                } else {
                    format!("EPRT |1|{a}.{b}.{c}.{d}|{data_port}|\r\n")
                };
                frames.push(c2s(ctrl_port, 21, TCP_PSH | TCP_ACK).payload(cmd.as_bytes()));
                frames
                    .push(s2c(21, ctrl_port, TCP_PSH | TCP_ACK).payload(b"200 Command okay.\r\n"));
                (false, data_port, 20)
            }
        };
        // Segments of the data connection: from its opener (`first`) or the other end.
        let seg = |first: bool, flags| {
            if first == from_client {
                c2s(client_port, server_port, flags)
            } else {
                s2c(server_port, client_port, flags)
            }
        };
        frames.push(seg(true, TCP_SYN));
        frames.push(seg(false, TCP_SYN | TCP_ACK));
        frames.push(seg(true, TCP_ACK));
        for i in 0..3u8 {
            frames.push(seg(false, TCP_PSH | TCP_ACK).payload(&[0x5a ^ i; 120]));
            frames.push(seg(true, TCP_ACK));
        }
        if k % 3 == 2 {
            frames.push(seg(false, TCP_RST));
        } else {
            frames.push(seg(false, TCP_FIN | TCP_ACK));
            frames.push(seg(true, TCP_FIN | TCP_ACK));
            frames.push(seg(false, TCP_ACK));
        }
        for (j, f) in frames.into_iter().enumerate() {
            let at = 4 * u32::from(k) + j as u32;
            timed.push((at, timed.len(), f.pad_to(60).build()));
        }
    }
    // Background: one frame of the mix every three steps.
    let end = timed.iter().map(|t| t.0).max().unwrap_or(0);
    for (i, p) in mixed_traffic(6, end as usize / 3).into_iter().enumerate() {
        timed.push((3 * i as u32 + 1, timed.len(), p.data));
    }
    timed.sort_by_key(|t| (t.0, t.1));
    timed.into_iter().map(|t| t.2).collect()
}

#[test]
fn ftpcap_tracker_on_ftp_frames_and_mutations() {
    use netsift_swift::ftpcap::{Event, Tracker};
    let mut rng = Rng::new(6);
    let frames = ftp_frames(8);
    // The seed is FTP as the tracker reads it: every session's data connection (announced
    // each of the four ways) opens once and closes once.
    let mut tracker = Tracker::new();
    let (mut opened, mut closed) = (Vec::new(), 0);
    for f in &frames {
        match tracker.observe(f) {
            Some(Event::Open(c)) => opened.push(c),
            Some(Event::Close(c)) => {
                assert!(opened.contains(&c), "{c:?} closed but never opened");
                closed += 1;
            }
            None => {}
        }
    }
    assert_eq!((opened.len(), closed), (8, 8), "{opened:?}");
    assert_eq!(tracker.open_connections(), 0);
    // Passive mode opens connections from the client (198.18.20.x), active mode from the
    // server (198.18.10.x): four of each.
    assert_eq!(opened.iter().filter(|c| c.from[2] == 20).count(), 4);
    // The frames in the fuzz encoding (frames of up to 255 bytes).
    let mut input = Vec::new();
    for f in &frames {
        let f = &f[..f.len().min(255)];
        input.push(f.len() as u8);
        input.extend_from_slice(f);
    }
    fuzz::ftpcap_tracker(&input);
    // The mutations work on the first 4 KiB: every kind of announcement is in it.
    let window = &input[..input.len().min(4096)];
    for word in [&b"227 "[..], b"229 ", b"PORT ", b"EPRT "] {
        assert!(
            window.windows(word.len()).any(|w| w == word),
            "no {:?} in the mutated window",
            String::from_utf8_lossy(word)
        );
    }
    for _ in 0..2_000 {
        let mut m = window.to_vec();
        for _ in 0..4 {
            let at = rng.below(m.len() as u64) as usize;
            m[at] = rng.bytes(1)[0];
        }
        fuzz::ftpcap_tracker(&m);
    }
    for input in stored_inputs("ftpcap_tracker") {
        fuzz::ftpcap_tracker(&input);
    }
}

#[test]
fn classbench_parse_on_shared_rules_and_mutations() {
    let mut rng = Rng::new(7);
    let root = data::dir().join("classbench/ehzuf-HyperSplit");
    let rules = std::fs::read_to_string(root.join("rules/fw1")).unwrap();
    let trace = std::fs::read_to_string(root.join("traces/fw1_trace")).unwrap();
    let head: String = rules.lines().take(60).map(|l| format!("{l}\n")).collect();
    let tail: String = trace.lines().take(200).map(|l| format!("{l}\n")).collect();
    let input = format!("{head}--\n{tail}").into_bytes();
    fuzz::classbench_parse(&input);
    for _ in 0..300 {
        let mut m = input.clone();
        let at = rng.below(m.len() as u64) as usize;
        m[at] = *rng.pick(b"@/:. 0123456789xXfF\n\t");
        fuzz::classbench_parse(&m);
        fuzz::classbench_parse(&m[..at]);
    }
    for input in stored_inputs("classbench_parse") {
        fuzz::classbench_parse(&input);
    }
}

#[test]
fn classbench_seed_on_shared_seeds_and_mutations() {
    let mut rng = Rng::new(11);
    for name in ["acl1", "fw1", "ipc1"] {
        let seed =
            std::fs::read(data::dir().join(format!("classbench/seeds/{name}_seed"))).unwrap();
        fuzz::classbench_seed(&seed);
        for _ in 0..40 {
            let mut m = seed.clone();
            let at = rng.below(m.len() as u64) as usize;
            m[at] = *rng.pick(b"-#.0123456789 \n\te");
            fuzz::classbench_seed(&m);
            fuzz::classbench_seed(&m[..at]);
        }
    }
    for input in stored_inputs("classbench_seed") {
        fuzz::classbench_seed(&input);
    }
}

#[test]
fn iptables_hitables_on_a_sample_set_and_mutations() {
    let mut rng = Rng::new(13);
    let mut text = String::from(
        "# sample\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [3:180]\n:OUTPUT ACCEPT [0:0]\n:USR - [0:0]\n",
    );
    text.push_str("-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n");
    for i in 0..40u32 {
        let target = ["ACCEPT", "DROP", "USR", "RETURN"][(i % 4) as usize];
        text.push_str(&format!(
            "-A FORWARD -s 10.{}.0.0/16 -d 192.168.{}.0/24 -p {} -m {} --dport {}:{} -j {target}\n",
            i % 7,
            i % 5,
            ["tcp", "udp"][(i % 2) as usize],
            ["tcp", "udp"][(i % 2) as usize],
            1000 + i * 10,
            1005 + i * 10
        ));
    }
    text.push_str("-A FORWARD -p icmp -j ACCEPT\n-A USR -p tcp ! --dport 22 -j DROP\n-A USR -j RETURN\nCOMMIT\n");
    if let Err(e) = netsift_classify::iptables::parse(&text) {
        panic!("the sample does not parse: {e}");
    }
    let input = text.into_bytes();
    fuzz::iptables_hitables(&input);
    for _ in 0..300 {
        let mut m = input.clone();
        let at = rng.below(m.len() as u64) as usize;
        m[at] = *rng.pick(b"-!:./0123456789 \nAJDPRstdpjg");
        fuzz::iptables_hitables(&m);
        fuzz::iptables_hitables(&m[..at]);
    }
    for input in stored_inputs("iptables_hitables") {
        fuzz::iptables_hitables(&input);
    }
}

#[test]
fn offload_targets_on_samples_and_mutations() {
    let mut rng = Rng::new(17);
    let script = b"# RTC-Mon\n+(1,0,udp,0.0.0.0,0,0.0.0.0,5060)\n+(2,-1,tcp,0.0.0.0,0,0.0.0.0,0)\n+(10,2,udp,10.0.0.1,16384,10.0.0.2,16386)\n+(11,1,any,[2001:db8::1]/64,0,::,53)\n-(10)\nquit\n".to_vec();
    fuzz::offload_text(&script);
    for _ in 0..2000 {
        let mut m = script.clone();
        let at = rng.below(m.len() as u64) as usize;
        m[at] = *rng.pick(b"+-(),./:[]0123456789 \nudptcany#q");
        fuzz::offload_text(&m);
        fuzz::offload_text(&m[..at]);
    }
    let frames: Vec<Vec<u8>> = netsift_capture::generate::mixed_traffic(5, 200)
        .into_iter()
        .map(|p| p.data)
        .collect();
    let exprs = [
        "tcp port 80",
        "not port 53",
        "ip and not host 10.0.0.1",
        "udp and (dst port 53 or src net 10.0.0.0/8)",
        "vlan and tcp",
        "ip6 and not tcp",
        "ip[6:2] & 0x1fff != 0 or udp",
    ];
    for (i, f) in frames.iter().enumerate() {
        let e = exprs[i % exprs.len()];
        let mut input = vec![e.len() as u8];
        input.extend_from_slice(e.as_bytes());
        input.extend_from_slice(f);
        fuzz::offload_compile(&input);
        let at = 1 + e.len() + rng.below(f.len() as u64) as usize;
        input[at] = rng.next_u32() as u8;
        fuzz::offload_compile(&input);
    }
    for target in ["offload_text", "offload_compile"] {
        for input in stored_inputs(target) {
            if target == "offload_text" {
                fuzz::offload_text(&input);
            } else {
                fuzz::offload_compile(&input);
            }
        }
    }
}

#[test]
fn fpl_compile_on_programs_and_mutations() {
    let mut rng = Rng::new(23);
    let programs = [
        include_str!("../../fpl/examples/fig6.fpl"),
        include_str!("../../fpl/examples/fig7.fpl"),
        "IF (PKT.IP_PROTO == PROTO_UDP) THEN MEM[0]++; RETURN(1); FI",
        "FOR (R[1] = 0; R[1] < 8; R[1]++) MEM[R[1]] = PKT.B[R[1]]; ROF RETURN (MEM[3] ^ PKT.W[12]);",
    ];
    for p in programs {
        let bytes = p.as_bytes().to_vec();
        fuzz::fpl_compile(&bytes);
        for _ in 0..300 {
            let mut m = bytes.clone();
            let at = rng.below(m.len() as u64) as usize;
            m[at] = *rng.pick(b"()[];=+-*/%&|^<>!0123456789 RMEPKTBWIFHNLSOAX.\n");
            fuzz::fpl_compile(&m);
            fuzz::fpl_compile(&m[..at]);
        }
    }
    for input in stored_inputs("fpl_compile") {
        fuzz::fpl_compile(&input);
    }
}

#[test]
fn graph_parse_on_graphs_and_mutations() {
    let mut rng = Rng::new(29);
    let inputs = [
        "(device,eth0) | (device,eth1) -> (sampler,2,4) -> (bpf,\"tcp\") | (bpf,\"udp\") -> (bytecount,,8); (device,eth0) -> (sampler,2,4) -> (bpf,\"icmp\") -> (packetcount,,8)",
        "(gen,1,100) -> (strsearch,\"GET\",\"\\x90\\x90\",16) -> (flowcount,tcp,4096) # c\n -> (snap,64)",
        "default deny\nuser root: allow\nrequire strsearch after sampler\nuser alice: only \"net 198.18.1.0/24\"\nmax mbuf 64K\n",
    ];
    for g in inputs {
        let bytes = g.as_bytes().to_vec();
        fuzz::graph_parse(&bytes);
        for _ in 0..500 {
            let mut m = bytes.clone();
            let at = rng.below(m.len() as u64) as usize;
            m[at] = *rng.pick(b"()|->,;\"\\#: \n0123456789abcdefghijklmnopqrstuvwxyz");
            fuzz::graph_parse(&m);
            fuzz::graph_parse(&m[..at]);
        }
    }
    for input in stored_inputs("graph_parse") {
        fuzz::graph_parse(&input);
    }
}

#[test]
fn daemon_proto_on_messages_buffers_and_mutations() {
    let mut rng = Rng::new(31);
    let inputs: [&[u8]; 4] = [
        b"open pref=fast slots=8 slot_size=128 ibuf=16 max=4096 callback=100\n(device,\"veth0\") -> (bpf,\"udp\")",
        b"close 3",
        b"ok flow=3 link=1 mbufs=2:8",
        b"err\n(gen,1,10) -> (bpf,\"tcp port\")\n                ^",
    ];
    for bytes in inputs {
        fuzz::daemon_proto(bytes);
        for _ in 0..300 {
            let mut m = bytes.to_vec();
            let at = rng.below(m.len() as u64) as usize;
            m[at] = rng.below(256) as u8;
            fuzz::daemon_proto(&m);
            fuzz::daemon_proto(&m[..at]);
        }
    }
    // Random buffers: every size and byte pattern the layout allows.
    for _ in 0..3000 {
        let n = 16 + rng.below(300) as usize;
        let data: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
        fuzz::daemon_proto(&data);
    }
    for input in stored_inputs("daemon_proto") {
        fuzz::daemon_proto(&input);
    }
}

/// A hostile client's scripts against a running daemon (random ones and the stored inputs):
/// the daemon survives each and serves a flow exactly afterwards.
#[test]
fn daemon_client_scripts_never_break_the_daemon() {
    let mut rng = Rng::new(41);
    let n = std::env::var("NETSIFT_FUZZ_REPLAY_SCRIPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    for _ in 0..n {
        let len = 8 + rng.below(200) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
        fuzz::daemon_client(&data);
    }
    for input in stored_inputs("daemon_client") {
        fuzz::daemon_client(&input);
    }
}

#[test]
fn flow_parse_on_every_shared_packet_and_mutations() {
    let mut rng = Rng::new(17);
    let mut n = 0;
    for (dlt, packets) in netsift_testkit::corpus::packets_by_dlt() {
        let link = netsift_wire::LinkType::from_dlt(dlt as u32);
        // The packet's own link type where the parser walks it, else every pick in turn.
        let own = fuzz::FLOW_LINK_TYPES.iter().position(|&l| l == link);
        for (i, (p, _)) in packets.iter().enumerate() {
            let pick = own.unwrap_or(i % fuzz::FLOW_LINK_TYPES.len()) as u8;
            let mut input = vec![pick];
            input.extend_from_slice(p);
            fuzz::flow_parse(&input);
            // A cut and a flipped byte in the headers.
            let cut = rng.below(input.len() as u64 + 1) as usize;
            fuzz::flow_parse(&input[..cut]);
            if input.len() > 1 {
                let at = 1 + rng.below((input.len() - 1).min(80) as u64) as usize;
                input[at] ^= 1 << rng.below(8);
                fuzz::flow_parse(&input);
            }
            n += 3;
        }
    }
    for input in stored_inputs("flow_parse") {
        fuzz::flow_parse(&input);
        n += 1;
    }
    assert!(n > 10_000, "only {n} inputs: is the shared data there?");
    println!("flow_parse: {n} inputs");
}
