//! A NIC pre-filter in front of a host firewall (Deri et al. §5.5).
//!
//! A host firewall (iptables) spends CPU time on every packet, including the ones it is going
//! to drop anyway. The paper moves the firewall's DROP rules into the NIC so that those packets
//! never reach the host. Rules are first-match, so only the DROP rules that come before the
//! first ACCEPT rule can be moved without changing the verdicts (a later DROP may be shadowed by
//! an earlier ACCEPT); the example offloads exactly that prefix and leaves the whole policy in
//! software.
//!
//! The policy is written inline (iptables syntax for display, [`Match`]es for the rules). A
//! generated mix goes through an [`EmulatedNic`] (`ntuple:256`: prefixes allowed) holding the
//! offloaded DROP rules, the host firewall evaluates the policy on what the NIC delivers, and the
//! example checks that every packet gets the verdict the policy alone gives it. It prints the
//! per-rule NIC counters and the CPU-saved fraction (packets that never reach software).
//!
//! Run with `cargo run --release -p netsift-offload --example firewall_prefilter`.

use std::net::IpAddr;

use netsift_capture::generate::Mix;
use netsift_offload::rule::{PROTO_TCP, PROTO_UDP};
use netsift_offload::{Action, EmulatedNic, Family, FlowKey, Match, Profile, Rule, RuleId};

const PACKETS: usize = 50_000;

/// One line of the policy: its iptables spelling and what it matches.
struct Line {
    iptables: &'static str,
    pattern: Match,
    accept: bool,
}

fn addr(s: &str) -> IpAddr {
    s.parse().expect("a literal address")
}

fn policy() -> Result<Vec<Line>, String> {
    let v4 = Match::new(Family::V4);
    let e = |e: netsift_offload::OffloadError| e.to_string();
    let p26 = Family::V4.prefix_mask(26);
    let full = Family::V4.full_mask();
    Ok(vec![
        Line {
            iptables: "-A INPUT -s 198.18.0.128/26 -j DROP",
            pattern: v4.try_src(addr("198.18.0.128"), p26).map_err(e)?,
            accept: false,
        },
        Line {
            iptables: "-A INPUT -p tcp --dport 22 -j DROP",
            pattern: v4.with_proto(PROTO_TCP).with_dst_port(22),
            accept: false,
        },
        Line {
            iptables: "-A INPUT -p udp -d 198.19.0.3 --dport 53 -j DROP",
            pattern: v4
                .with_proto(PROTO_UDP)
                .try_dst(addr("198.19.0.3"), full)
                .map_err(e)?
                .with_dst_port(53),
            accept: false,
        },
        Line {
            iptables: "-A INPUT -p icmp -s 198.18.0.0/26 -j DROP",
            pattern: v4
                .with_proto(1)
                .try_src(addr("198.18.0.0"), p26)
                .map_err(e)?,
            accept: false,
        },
        Line {
            iptables: "-A INPUT -p tcp -s 198.18.0.10 --dport 443 -j ACCEPT",
            pattern: v4
                .with_proto(PROTO_TCP)
                .try_src(addr("198.18.0.10"), full)
                .map_err(e)?
                .with_dst_port(443),
            accept: true,
        },
        // After an ACCEPT: stays in software (198.18.0.10's HTTPS must still pass).
        Line {
            iptables: "-A INPUT -p tcp --dport 443 -s 198.18.0.0/28 -j DROP",
            pattern: v4
                .with_proto(PROTO_TCP)
                .try_src(addr("198.18.0.0"), Family::V4.prefix_mask(28))
                .map_err(e)?
                .with_dst_port(443),
            accept: false,
        },
        Line {
            iptables: "-P INPUT ACCEPT",
            pattern: v4,
            accept: true,
        },
    ])
}

/// The host firewall: first match wins; non-IP packets and unmatched ones are accepted.
fn host_verdict(policy: &[Line], key: Option<&FlowKey>) -> bool {
    let Some(key) = key else { return true };
    policy
        .iter()
        .find(|l| l.pattern.matches(key))
        .is_none_or(|l| l.accept)
}

/// Runs the use case; `quiet` suppresses the report.
pub fn run(quiet: bool) -> Result<(), String> {
    let policy = policy()?;
    let mut nic = EmulatedNic::with_profile(4, Profile::Ntuple { rules: 256 });
    let offloaded: Vec<(RuleId, &Line)> = policy
        .iter()
        .take_while(|l| !l.accept)
        .enumerate()
        .map(|(i, l)| (RuleId(i as u32 + 1), l))
        .collect();
    let n = offloaded.len();
    for (i, (id, line)) in offloaded.iter().enumerate() {
        // Earlier iptables lines get higher priorities (first match wins in the NIC too).
        let prio = u8::try_from(n - i).map_err(|e| e.to_string())?;
        nic.install(Rule::new(*id, line.pattern, Action::Drop).with_priority(prio))
            .map_err(|e| format!("{}: {e}", line.iptables))?;
    }

    let packets = Mix::default().generate(0xf1, PACKETS);
    let (mut host_seen, mut policy_drops, mut wrong) = (0u64, 0u64, 0u64);
    for p in &packets {
        let key = FlowKey::from_frame(&p.data);
        let want = host_verdict(&policy, key.as_ref());
        policy_drops += u64::from(!want);
        let got = match nic.receive_packet(p.as_ref()) {
            d if d.is_dropped() => false,
            _ => {
                host_seen += 1;
                host_verdict(&policy, key.as_ref())
            }
        };
        wrong += u64::from(got != want);
    }
    let stats = *nic.stats();
    let total = packets.len() as u64;
    if !quiet {
        println!("Firewall pre-filter (§5.5), profile ntuple:256");
        println!("  policy ({n} leading DROP rules offloaded):");
        for (i, l) in policy.iter().enumerate() {
            let where_ = match offloaded.get(i) {
                Some((id, _)) => {
                    let c = nic.rule_counters(*id).unwrap_or_default();
                    format!("NIC rule {id}: {} packets", c.packets)
                }
                None => "host only".to_string(),
            };
            println!("    {:<58} {where_}", l.iptables);
        }
        println!(
            "  {total} packets: policy drops {policy_drops}, NIC drops {}, host firewall sees {host_seen}",
            stats.dropped
        );
        println!(
            "  CPU saved: {:.1}% of the packets never reach software ({:.1}% of the policy's drops)",
            100.0 * stats.dropped as f64 / total as f64,
            100.0 * stats.dropped as f64 / policy_drops.max(1) as f64
        );
    }
    if wrong > 0 {
        return Err(format!(
            "{wrong} packets got a verdict the policy does not give"
        ));
    }
    if stats.dropped == 0 || host_seen + stats.dropped != total {
        return Err("the NIC dropped nothing or lost packets".into());
    }
    if !quiet {
        println!("  OK: NIC + host firewall = the policy on every packet");
    }
    Ok(())
}

#[allow(dead_code)]
fn main() {
    if let Err(e) = run(false) {
        eprintln!("firewall_prefilter: FAILED: {e}");
        std::process::exit(1);
    }
}
