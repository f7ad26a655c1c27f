//! Lawful interception of one subscriber (Deri et al. §5.4).
//!
//! A lawful-interception probe must copy every packet of one subscriber and nothing else; at
//! line rate the rest of the link must not reach the CPU. As in the paper, the NIC does the
//! selection: two wildcard rules per address family (source = X, destination = X) steer the
//! subscriber's traffic to a dedicated queue (3) and a lowest-priority wildcard rule per family
//! drops everything else. The subscriber has an IPv4 and an IPv6 address.
//!
//! The example feeds a generated mix (IPv4/IPv6 TCP, UDP, ICMP, some VLAN-tagged; no ARP,
//! which no NIC rule can match) through an [`EmulatedNic`] with the mlx5-like profile and
//! checks that exactly the subscriber's packets arrive and all on queue 3. It then compiles the
//! capture filter `host X4 or host X6` with the filter compiler (allow-list steered to queue 3)
//! and compares: the compiled table must deliver the same packets on the same queue, and the
//! compiled rules plus the residual software filter must give exactly tcpdump's verdicts. The
//! difference between the two views is printed: tcpdump's `host` does not look inside VLAN
//! tags, the NIC does, so the hand-written intercept also catches the subscriber's tagged
//! frames.
//!
//! Run with `cargo run --release -p netsift-offload --example lawful_intercept`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use netsift_capture::LinkType;
use netsift_capture::generate::Mix;
use netsift_offload::compile::{Options, compile};
use netsift_offload::{Action, EmulatedNic, Family, FlowKey, Match, Profile, Rule, RuleId};

const QUEUES: u16 = 4;
/// The interception queue.
const LI_QUEUE: u16 = 3;
const PACKETS: usize = 40_000;

fn subscriber() -> (IpAddr, IpAddr) {
    (
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, 7)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7)),
    )
}

fn intercept_rules() -> Result<Vec<Rule>, String> {
    let (x4, x6) = subscriber();
    let mut rules = Vec::new();
    let mut id = 1;
    for (family, x) in [(Family::V4, x4), (Family::V6, x6)] {
        let full = family.full_mask();
        let e = |e: netsift_offload::OffloadError| e.to_string();
        for m in [
            Match::new(family).try_src(x, full).map_err(e)?,
            Match::new(family).try_dst(x, full).map_err(e)?,
        ] {
            rules.push(Rule::new(RuleId(id), m, Action::Queue(LI_QUEUE)).with_priority(1));
            id += 1;
        }
    }
    rules.push(Rule::new(RuleId(id), Match::new(Family::V4), Action::Drop));
    rules.push(Rule::new(
        RuleId(id + 1),
        Match::new(Family::V6),
        Action::Drop,
    ));
    Ok(rules)
}

/// Runs the use case; `quiet` suppresses the report.
pub fn run(quiet: bool) -> Result<(), String> {
    let (x4, x6) = subscriber();
    let mut nic = EmulatedNic::with_profile(QUEUES, Profile::Mlx5);
    let rules = intercept_rules()?;
    for r in &rules {
        nic.install(*r).map_err(|e| e.to_string())?;
    }

    let expr = format!("host {x4} or host {x6}");
    let pred = netsift_lang::compile(&expr, &netsift_lang::Context::new(LinkType::ETHERNET))
        .map_err(|e| e.to_string())?;
    let mut opts = Options::new(Profile::Mlx5);
    opts.queue = Some(LI_QUEUE);
    let offload = compile(&pred, &opts).map_err(|e| e.to_string())?;
    let compiled_rules: Vec<_> = offload.rules().to_vec();
    let notes = offload.notes().to_vec();
    let prog = netsift_bpf::compile::compile(offload.residual(), &Default::default())
        .map_err(|e| e.to_string())?;
    let residual =
        netsift_bpf::Filter::new(prog, netsift_bpf::Rules::Libpcap).map_err(|e| e.to_string())?;
    let mut cnic = EmulatedNic::new(QUEUES, offload.into_table());

    let mix = Mix {
        weights: [3, 1, 2, 1, 1, 1, 0],
        clients: 40,
        ..Mix::default()
    };
    let packets = mix.generate(0x11, PACKETS);
    let (mut subscriber_pkts, mut tagged_sub, mut errors) = (0u64, 0u64, Vec::new());
    let (mut same, mut exact) = (0u64, 0u64);
    for (i, p) in packets.iter().enumerate() {
        let key = FlowKey::from_frame(&p.data);
        let is_sub = key.is_some_and(|k| [x4, x6].iter().any(|x| k.src == *x || k.dst == *x));
        subscriber_pkts += u64::from(is_sub);
        tagged_sub += u64::from(is_sub && key.is_some_and(|k| k.vlan.is_some()));
        let got = nic.receive_packet(p.as_ref());
        let want = is_sub.then_some(LI_QUEUE);
        if got.queue() != want {
            errors.push(format!(
                "packet {i}: on {:?}, expected {want:?}",
                got.queue()
            ));
        }
        let cgot = cnic.receive_packet(p.as_ref());
        same += u64::from(cgot.queue() == got.queue());
        let accepted = residual.run(&p.data, p.wire_len) != 0;
        let kept = cgot.queue().is_some() && accepted;
        exact += u64::from(kept == accepted);
    }
    let n = packets.len() as u64;
    let stats = *nic.stats();
    if !quiet {
        println!("Lawful interception (§5.4) of {x4} / {x6}, profile mlx5, queue {LI_QUEUE}");
        println!("  hand-written rules:");
        for r in &rules {
            let c = nic.rule_counters(r.id).unwrap_or_default();
            println!("    {r}: {} packets", c.packets);
        }
        println!(
            "  {n} packets: subscriber {subscriber_pkts} ({tagged_sub} VLAN-tagged), dropped in the NIC {}",
            stats.dropped
        );
        for (q, s) in nic.queue_stats().iter().enumerate() {
            println!("    queue {q}: {} packets", s.packets);
        }
        println!("  compiled from `{expr}` (queue {LI_QUEUE}):");
        for (r, role) in &compiled_rules {
            println!("    [{role}] {r}");
        }
        for note in &notes {
            println!("    note: {note}");
        }
        println!("  compiled NIC delivers like the hand-written rules on {same} of {n} packets");
        println!(
            "  compiled + residual = tcpdump `{expr}` on {exact} of {n} packets; \
             tcpdump misses the {tagged_sub} tagged subscriber packets the NIC intercepts"
        );
    }
    if let Some(e) = errors.first() {
        return Err(format!("{} packets misdelivered; first: {e}", errors.len()));
    }
    if subscriber_pkts == 0 || nic.queue_stats()[usize::from(LI_QUEUE)].packets != subscriber_pkts {
        return Err("the interception queue does not hold exactly the subscriber".into());
    }
    if same != n {
        return Err(format!("the compiled rules differ on {} packets", n - same));
    }
    if exact != n {
        return Err(format!(
            "compiled + residual is wrong on {} packets",
            n - exact
        ));
    }
    if !quiet {
        println!("  OK: only the subscriber's packets arrive, all on queue {LI_QUEUE}");
    }
    Ok(())
}

#[allow(dead_code)]
fn main() {
    if let Err(e) = run(false) {
        eprintln!("lawful_intercept: FAILED: {e}");
        std::process::exit(1);
    }
}
