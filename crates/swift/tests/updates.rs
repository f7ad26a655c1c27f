//! Updates while another thread filters: the reader never sees a half-written pass, every
//! operation of the update API does what it says, and hierarchical execution never changes a
//! verdict.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use netsift_swift::build;
use netsift_swift::{Inst, Mode, Op, open};

fn eq8(off: u16, v: u32) -> Inst {
    let mut i = Inst::new(Op::Eq8, Mode::D, off);
    i.add_value(v).unwrap();
    i
}

#[test]
fn readers_never_see_half_a_pass() {
    let (mut w, mut r) = open(1);
    // Decoy so that the filter is never empty.
    w.new_pass(&[eq8(0, 99)]).unwrap();
    let id = w.new_pass(&[eq8(0, 1), eq8(1, 1)]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let runs = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, bad, runs) = (stop.clone(), bad.clone(), runs.clone());
        std::thread::spawn(move || {
            // [1,2] and [2,1] match only a mixed, half-written pass.
            let mixed = [[1u8, 2], [2, 1]];
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                r.run_batch(mixed.iter().map(|p| (&p[..], 2)), &mut out);
                bad.fetch_add(
                    out.iter().filter(|&&v| v != 0).count() as u64,
                    Ordering::Relaxed,
                );
                runs.fetch_add(2, Ordering::Relaxed);
            }
        })
    };
    for k in 0..200_000u32 {
        let v = 1 + (k % 2);
        w.replace_pass(id, &[eq8(0, v), eq8(1, v)]).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert_eq!(
        bad.load(Ordering::Relaxed),
        0,
        "a reader saw a half-written pass"
    );
    assert!(runs.load(Ordering::Relaxed) > 0);
}

#[test]
fn the_update_api_does_what_it_says() {
    let (mut w, mut r) = open(64);
    // Empty filter: accepts all.
    assert_eq!(r.run(&[], 0), 64);
    let a = w.new_pass(&[eq8(0, 7)]).unwrap();
    assert_eq!((r.run(&[7], 1), r.run(&[8], 1)), (64, 0));
    w.add_param(a, 0, 8).unwrap();
    assert_eq!(r.run(&[8], 1), 64);
    w.del_param(a, 0, 7).unwrap();
    assert_eq!(r.run(&[7], 1), 0);
    assert!(w.del_param(a, 0, 7).is_err());
    // dup, then change the copy.
    let b = w.dup_pass(a).unwrap();
    assert!(w.pass(b).unwrap()[0].copied());
    w.select_op(b, 0, eq8(0, 9)).unwrap();
    assert!(!w.pass(b).unwrap()[0].copied());
    assert_eq!((r.run(&[8], 1), r.run(&[9], 1)), (64, 64));
    // Append an instruction to the copy.
    w.select_op(b, 1, eq8(1, 5)).unwrap();
    assert_eq!((r.run(&[9, 5], 2), r.run(&[9, 6], 2)), (64, 0));
    // poke: change the offset of instruction 1 (command word).
    let cmd = w.pass(b).unwrap()[1].cmd;
    w.poke_inst(b, 1, 0, (cmd & 0xffff) | (2 << 16)).unwrap();
    assert_eq!(r.run(&[9, 0, 5], 3), 64);
    // Deleting: stale ids are refused.
    w.del_pass(a).unwrap();
    assert!(w.add_param(a, 0, 1).is_err());
    assert_eq!(r.run(&[8], 1), 0);
    w.del_pass(b).unwrap();
    assert_eq!(w.passes(), 0);
    assert_eq!(r.run(&[8], 1), 64, "an empty filter accepts all again");
    // A new pass reuses the slot but not the id.
    let c = w.new_pass(&[eq8(0, 1)]).unwrap();
    assert_ne!(c, a);
    assert!(w.select_op(a, 0, eq8(0, 1)).is_err());
}

#[test]
fn hierarchical_execution_never_changes_a_verdict() {
    // A parent and many children differing in one instruction; random packets; with and
    // without the shortcut.
    let (mut w, mut r) = open(1);
    let parent = w
        .new_pass(&[
            build::ether_type(&[0x800]),
            build::ip4_proto_nofrag(&[6]),
            build::tcp_udp_port(&[21]),
        ])
        .unwrap();
    for port in 1000..1100u16 {
        let c = w.dup_pass(parent).unwrap();
        w.select_op(c, 2, build::tcp_udp_port(&[port])).unwrap();
    }
    // Change the parent after the copies were made: their marks must not mislead.
    w.select_op(parent, 1, build::ip4_proto_nofrag(&[17]))
        .unwrap();
    let mut r2 = w.reader();
    r2.set_hierarchical(false);
    let mut x = 12345u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut p = [0u8; 14 + 20 + 4];
        p[12..14].copy_from_slice(&[8, 0]);
        p[14] = 0x45;
        p[23] = if x & 1 == 0 { 6 } else { 17 };
        let port = if x & 2 == 0 {
            21
        } else {
            1000 + ((x >> 8) % 120) as u16
        };
        p[36..38].copy_from_slice(&port.to_be_bytes());
        let cut = if x & 4 == 0 {
            p.len()
        } else {
            (x >> 20) as usize % p.len()
        };
        assert_eq!(r.run(&p[..cut], 60), r2.run(&p[..cut], 60));
    }
}

/// `Reader::run` serves plain filters through an index of passes keyed by the address their
/// first instruction names; `run_batch` runs every pass in order. They must agree on every
/// packet, through additions, deletions and replacements, on short packets (where a read can
/// abort the packet) and on packets whose addresses name no, one or two keyed passes.
#[test]
fn indexed_run_equals_running_every_pass() {
    let (mut w, mut r) = open(65_535);
    let mut batch = w.reader();
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let hosts: Vec<u32> = (0..12).map(|i| 0xc612_0a00 | i).collect();
    let mut ids = Vec::new();
    let mut out = Vec::new();
    for round in 0..400 {
        // Change the filter: add a keyed pass, an unkeyed one, delete or replace one.
        match rnd(6) {
            0 | 1 => {
                let h = hosts[rnd(hosts.len() as u64) as usize];
                let mut p = build::ip4_host_either(&[h]);
                p.push(build::ip4_proto_ports(6, &[1000 + rnd(4) as u16]));
                ids.push(w.new_pass(&p).unwrap());
            }
            2 => {
                // Unkeyed: a port test first, or a host test with two addresses, or one that
                // reads far into the packet (aborts on short ones).
                let p = match rnd(3) {
                    0 => vec![build::tcp_udp_port(&[1000 + rnd(4) as u16])],
                    1 => build::ip4_host_either(&[hosts[0], hosts[1]]),
                    _ => vec![eq8(200, rnd(3) as u32)],
                };
                ids.push(w.new_pass(&p).unwrap());
            }
            3 if !ids.is_empty() => {
                let i = rnd(ids.len() as u64) as usize;
                w.del_pass(ids.swap_remove(i)).unwrap();
            }
            4 if !ids.is_empty() => {
                let i = rnd(ids.len() as u64) as usize;
                let h = hosts[rnd(hosts.len() as u64) as usize];
                w.replace_pass(ids[i], &build::ip4_host_either(&[h]))
                    .unwrap();
            }
            _ => {}
        }
        for _ in 0..40 {
            let len = [24usize, 33, 34, 60, 120, 240][rnd(6) as usize];
            let mut p = vec![0u8; len];
            p[12..14].copy_from_slice(&[8, 0]);
            p[14] = 0x45;
            p[23] = 6;
            let pick = |r: u64| {
                if r < 12 {
                    hosts[r as usize]
                } else {
                    0x0a00_0001 + r as u32
                }
            };
            let (s, d) = (pick(rnd(16)), pick(rnd(16)));
            if len >= 34 {
                p[26..30].copy_from_slice(&s.to_be_bytes());
                p[30..34].copy_from_slice(&d.to_be_bytes());
            }
            if len >= 38 {
                p[34..36].copy_from_slice(&(1000 + rnd(5) as u16).to_be_bytes());
            }
            if len > 200 {
                p[200] = rnd(3) as u8;
            }
            let one = r.run(&p, len as u32);
            batch.run_batch([(&p[..], len as u32)], &mut out);
            assert_eq!(
                one, out[0],
                "round {round}, {len}-byte packet {s:#x} -> {d:#x}"
            );
        }
    }
}
