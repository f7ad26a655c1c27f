//! The filter → NIC-rule compiler is exact: for every Ethernet corpus expression (and random
//! ones), for every profile, the emulated NIC drops only packets the filter rejects, so NIC rules
//! plus the residual software filter give the software filter's verdict on every packet of the
//! shared captures (and on truncated and mutated copies). Prints the fraction of packets the NIC
//! drops per profile.

use netsift_bpf::{Filter, Rules, compile};
use netsift_lang::{Context, compile as front};
use netsift_offload::compile::{Options, compile as offload};
use netsift_offload::{Action, FlowKey, Profile};
use netsift_testkit::{corpus, exprgen, rng::Rng};

const PROFILES: [&str; 7] = [
    "software",
    "82599",
    "82599-fdir-perfect",
    "82599-fdir-hash",
    "ntuple:256",
    "ntuple:8",
    "mlx5",
];

#[test]
fn nic_rules_plus_residual_equal_the_software_filter() {
    let by_dlt = corpus::packets_by_dlt();
    let frames: Vec<(Vec<u8>, u32)> = by_dlt.get(&1).cloned().unwrap_or_default();
    assert!(
        !frames.is_empty(),
        "no Ethernet captures in the shared data"
    );
    // The captures, plus truncated and mutated copies of some frames.
    let mut rng = Rng::new(0x0ff1_0ad5);
    let mut packets = frames.clone();
    for _ in 0..4000 {
        let (d, l) = rng.pick(&frames).clone();
        if rng.chance(1, 2) {
            let cut = rng.below(d.len() as u64 + 1) as usize;
            packets.push((d[..cut].to_vec(), l));
        } else {
            let mut d = d;
            for _ in 0..1 + rng.below(3) {
                if !d.is_empty() {
                    let i = rng.below(d.len().min(80) as u64) as usize;
                    d[i] = rng.next_u32() as u8;
                }
            }
            packets.push((d, l));
        }
    }
    let keys: Vec<Option<FlowKey>> = packets
        .iter()
        .map(|(d, _)| FlowKey::from_frame(d))
        .collect();
    let ctx = Context::new(netsift_wire::LinkType::ETHERNET);
    let mut exprs: Vec<String> = corpus::cases()
        .into_iter()
        .filter(|c| c.dlt == "EN10MB")
        .map(|c| c.expr)
        .collect();
    let seeds = exprgen::Seeds::from_frames(frames.iter().map(|(d, _)| &d[..]));
    for _ in 0..300 {
        exprs.push(exprgen::expression(&mut rng, &seeds, 3));
    }
    exprs.sort();
    exprs.dedup();
    let profiles: Vec<Profile> = PROFILES.iter().map(|p| p.parse().unwrap()).collect();
    let mut dropped = vec![0u64; profiles.len()];
    let mut rules = vec![0usize; profiles.len()];
    let (mut compiled, mut runs, mut wrong) = (0, 0u64, Vec::new());
    for expr in &exprs {
        let Ok(pred) = front(expr, &ctx) else {
            continue;
        };
        let Ok(program) = compile::compile(&pred, &compile::Options::default()) else {
            continue;
        };
        let Ok(filter) = Filter::new(program, Rules::Libpcap) else {
            continue;
        };
        compiled += 1;
        let verdicts: Vec<u32> = packets.iter().map(|(d, l)| filter.run(d, *l)).collect();
        for (i, profile) in profiles.iter().enumerate() {
            let o = offload(&pred, &Options::new(*profile)).unwrap();
            rules[i] += o.rules().len();
            let table = o.table();
            for (k, key) in keys.iter().enumerate() {
                runs += 1;
                let drop = key
                    .as_ref()
                    .and_then(|key| table.lookup(key))
                    .is_some_and(|r| r.action == Action::Drop);
                if drop {
                    dropped[i] += 1;
                    if verdicts[k] != 0 && wrong.len() < 20 {
                        wrong.push(format!(
                            "{profile}: `{expr}` packet {k} accepted by the filter, dropped by rule {}",
                            table.lookup(key.as_ref().unwrap()).unwrap()
                        ));
                    }
                }
            }
        }
    }
    let total = (compiled * packets.len()) as f64;
    println!(
        "{compiled} expressions x {} packets x {} profiles = {runs} NIC decisions",
        packets.len(),
        profiles.len()
    );
    for (i, p) in PROFILES.iter().enumerate() {
        println!(
            "  {p:<20} {:>7} rules  {:>5.1}% of packets dropped by the NIC",
            rules[i],
            100.0 * dropped[i] as f64 / total
        );
    }
    assert!(compiled > 300, "only {compiled} expressions compiled");
    assert!(
        wrong.is_empty(),
        "the NIC dropped accepted packets:\n{}",
        wrong.join("\n")
    );
}
