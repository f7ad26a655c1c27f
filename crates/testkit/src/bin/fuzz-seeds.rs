//! Write seed inputs for every fuzz target into `DIR/<target>/`, built from the shared captures
//! and from programs libpcap compiles: `fuzz-seeds DIR`.

use std::fs;
use std::path::Path;

use netsift_bpf::{Program, asm};
use netsift_testkit::{data, fuzz, oracle};

/// Expressions whose compiled programs seed the BPF targets.
const EXPRESSIONS: [&str; 12] = [
    "",
    "ip",
    "tcp port 80",
    "net 10.0.0.0/8 or net 172.16.0.0/12 or net 192.168.0.0/16",
    "ip6 protochain 6",
    "vlan 10 and udp",
    "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
    "ether broadcast or ip multicast",
    "icmp[icmptype] = icmp-echo",
    "len > 100 and ip[2:2] - ((ip[0]&0xf)<<2) > 40",
    "arp or rarp",
    "ip and not src host 198.18.0.1",
];

fn write(dir: &Path, target: &str, name: &str, bytes: &[u8]) {
    let d = dir.join(target);
    fs::create_dir_all(&d).unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
    fs::write(d.join(name), bytes).unwrap_or_else(|e| panic!("cannot write seed: {e}"));
}

fn encode(program: &Program, packet: &[u8]) -> Vec<u8> {
    let n = program.len().min(63);
    let mut out = vec![n as u8];
    for i in &program.insns()[..n] {
        out.extend_from_slice(&i.code.to_le_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_le_bytes());
    }
    out.extend_from_slice(packet);
    out
}

/// FPL programs: the paper's figures and small ones touching each construct.
const FPL_SEEDS: &[&str] = &[
    include_str!("../../../fpl/examples/fig6.fpl"),
    include_str!("../../../fpl/examples/fig7.fpl"),
    "IF (PKT.IP_PROTO == PROTO_UDP) THEN MEM[0]++; RETURN(1); FI",
    "FOR (R[1] = 0; R[1] < 8; R[1]++) MEM[R[1]] = PKT.B[R[1]]; IF (R[1] == 5) THEN BREAK; FI ROF RETURN (MEM[3] ^ PKT.W[12]);",
    "R[2] = HASH(26, 8, 16); MEM[R[2]] += PKT.TCP_DPORT; RETURN (R[2] << 3 | PKT.B[14].U4[1]);",
];

/// FFPF graphs and a policy.
const GRAPH_SEEDS: &[&str] = &[
    "(device,eth0) | (device,eth1) -> (sampler,2,4) -> (bpf,\"tcp\") | (bpf,\"udp\") -> (bytecount,,8); (device,eth0) -> (sampler,2,4) -> (bpf,\"icmp\") -> (packetcount,,8)",
    "(gen,1,100) -> (strsearch,\"GET\",\"\\x90\\x90\",16) -> (flowcount,tcp,4096) # comment\n -> (snap,64)",
    "default deny\nuser root: allow\nrequire strsearch after sampler\nuser alice: only \"net 198.18.1.0/24\"\nmax mbuf 64K\n",
];

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: fuzz-seeds DIR");
        std::process::exit(2);
    };
    let dir = Path::new(&dir);
    let captures: Vec<_> = data::tcpdump_captures()
        .into_iter()
        .chain(data::libpcap_captures())
        .collect();
    let mut packets = Vec::new();
    for (i, path) in captures.iter().enumerate() {
        let bytes = fs::read(path).unwrap_or_default();
        if bytes.len() <= 1 << 16 {
            write(dir, "capture_read", &format!("seed-{i}"), &bytes);
        }
        let Ok(cap) = oracle::read_capture(path) else {
            continue;
        };
        if i % 8 == 0
            && let Some(p) = cap.packets.first()
        {
            packets.push(p.data.clone());
        }
        // The flow-key parser: the first packets of every capture of a link type it walks.
        let link = netsift_wire::LinkType::from_dlt(cap.dlt as u32);
        if let Some(pick) = fuzz::FLOW_LINK_TYPES.iter().position(|&l| l == link) {
            for (j, p) in cap.packets.iter().take(4).enumerate() {
                let mut input = vec![pick as u8];
                input.extend_from_slice(&p.data);
                write(dir, "flow_parse", &format!("seed-{i}-{j}"), &input);
            }
        }
    }
    let mut n = 0;
    for (i, expr) in EXPRESSIONS.iter().enumerate() {
        for optimize in [false, true] {
            let Ok(program) = oracle::compile(1, 262_144, expr, optimize) else {
                continue;
            };
            for (f, format) in [asm::Format::Asm, asm::Format::C, asm::Format::Decimal]
                .into_iter()
                .enumerate()
            {
                let text = asm::dump(&program, format);
                write(
                    dir,
                    "bpf_text",
                    &format!("seed-{i}-{optimize}-{f}"),
                    text.as_bytes(),
                );
            }
            let packet = packets
                .get(n % packets.len().max(1))
                .cloned()
                .unwrap_or_default();
            write(
                dir,
                "bpf_run",
                &format!("seed-{i}-{optimize}"),
                &encode(&program, &packet),
            );
            for target in ["jit_vs_interp", "ebpf_vs_interp"] {
                write(
                    dir,
                    target,
                    &format!("seed-{i}-{optimize}"),
                    &encode(&program, &packet),
                );
            }
            n += 1;
        }
    }
    // Filter expressions from libpcap's test suite.
    let mut exprs: Vec<String> = Vec::new();
    for table in ["accept.tsv", "reject.tsv"] {
        for r in data::libpcap_table(table) {
            exprs.push(r.get("expr").to_string());
        }
    }
    exprs.sort();
    exprs.dedup();
    for (i, e) in exprs.iter().enumerate() {
        write(dir, "lang_compile", &format!("seed-{i}"), e.as_bytes());
        write(dir, "lang_vs_libpcap", &format!("seed-{i}"), e.as_bytes());
    }
    // ClassBench rule sets with traces, seed files, and iptables rule sets converted from them.
    let cb = data::dir().join("classbench");
    for set in ["acl1", "fw1", "ipc1"] {
        let rules = fs::read_to_string(cb.join("ehzuf-HyperSplit/rules").join(set))
            .unwrap_or_else(|e| panic!("{set}: {e}"));
        let trace = fs::read_to_string(cb.join(format!("ehzuf-HyperSplit/traces/{set}_trace")))
            .unwrap_or_else(|e| panic!("{set}_trace: {e}"));
        let head: String = rules.lines().take(80).map(|l| format!("{l}\n")).collect();
        let tail: String = trace.lines().take(100).map(|l| format!("{l}\n")).collect();
        write(
            dir,
            "classbench_parse",
            &format!("seed-{set}"),
            format!("{head}--\n{tail}").as_bytes(),
        );
        if let Ok(parsed) = netsift_classify::classbench::parse_rules(&head) {
            let c = netsift_classify::iptables::from_classbench(&parsed, &Default::default());
            write(
                dir,
                "iptables_hitables",
                &format!("seed-{set}"),
                c.ruleset.to_restore().as_bytes(),
            );
        }
    }
    for e in fs::read_dir(cb.join("seeds"))
        .unwrap_or_else(|e| panic!("seeds: {e}"))
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        write(
            dir,
            "classbench_seed",
            &name,
            &fs::read(e.path()).unwrap_or_default(),
        );
    }
    // NIC rules: expressions with a frame each, and rules-text scripts.
    for (i, e) in exprs
        .iter()
        .filter(|e| e.len() < 256)
        .enumerate()
        .step_by(4)
    {
        let mut input = vec![e.len() as u8];
        input.extend_from_slice(e.as_bytes());
        input.extend_from_slice(
            &packets
                .get(i % packets.len().max(1))
                .cloned()
                .unwrap_or_default(),
        );
        write(dir, "offload_compile", &format!("seed-{i}"), &input);
    }
    for (i, script) in [
        "# RTC-Mon\n+(1,0,udp,0.0.0.0,0,0.0.0.0,5060)\n+(2,-1,tcp,0.0.0.0,0,0.0.0.0,0)\n+(10,2,udp,10.0.0.1,16384,10.0.0.2,16386)\n-(10)\n",
        "+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)\n+(2,3,17,[2001:db8::1],53,::,0)\n+(3,1,any,10.0.0.0/8,0,0.0.0.0,80)\n-(1)\nquit\n",
    ]
    .iter()
    .enumerate()
    {
        write(dir, "offload_text", &format!("seed-{i}"), script.as_bytes());
    }
    for (i, prog) in FPL_SEEDS.iter().enumerate() {
        write(dir, "fpl_compile", &format!("seed-{i}"), prog.as_bytes());
    }
    for (i, g) in GRAPH_SEEDS.iter().enumerate() {
        write(dir, "graph_parse", &format!("seed-{i}"), g.as_bytes());
    }
    println!("fuzz seeds written to {}", dir.display());
}
