//! Micro-benchmark of the flow-group buffers: nanoseconds per packet for writing a packet once
//! into the PBuf, appending it to the IBufs of 1, 2, 4 and 8 readers, and reading it from each
//! of them (touching its bytes), on one thread, for both buffer-management policies.
//!
//! ```text
//! cargo run --release -p netsift-ring --example buffer_bench [PACKETS]
//! ```
//!
//! One thread interleaves the writer and the readers in batches of 256 packets, the way a
//! capture thread and its applications share the work when they are scheduled on one core; the
//! numbers are CPU cost, not cross-core latency. Each line is the best of three runs.

use std::hint::black_box;
use std::time::Instant;

use netsift_capture::{LinkType, Timestamp};
use netsift_ring::Pkt;
use netsift_ring::buffer::{Group, Preference};

const BATCH: usize = 256;

fn run(pref: Preference, readers: usize, len: usize, packets: usize) -> (f64, u64) {
    let group = Group::new(4096, 2048, pref);
    let mut rs: Vec<_> = (0..readers).map(|_| group.add_reader(4096)).collect();
    let to: Vec<_> = rs.iter().map(|(id, _)| (*id, 1)).collect();
    let mut w = group.writer().expect("one writer");
    let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let mut sum = 0u64;
    let start = Instant::now();
    let mut done = 0;
    while done < packets {
        for i in 0..BATCH {
            let pkt = Pkt {
                data: &data,
                wire_len: len as u32,
                timestamp: Timestamp::new((done + i) as i64, 0),
                link_type: LinkType::ETHERNET,
            };
            w.write(&pkt, &to);
        }
        for (_, r) in &mut rs {
            while let Some(d) = r.next() {
                sum += u64::from(d.data[len - 1]) + u64::from(d.result);
            }
            r.release();
        }
        done += BATCH;
    }
    let ns = start.elapsed().as_nanos() as f64 / done as f64;
    let lost: u64 = rs
        .iter()
        .map(|(_, r)| r.stats().dropped + r.stats().overwritten)
        .sum();
    black_box(sum);
    (ns, lost)
}

fn main() {
    let packets: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    println!(
        "{packets} packets, batches of {BATCH}; ns per packet (write once + read by every reader)"
    );
    println!(
        "{:<12} {:>6} {:>8} {:>10} {:>14}",
        "policy", "bytes", "readers", "ns/pkt", "ns/pkt/reader"
    );
    for pref in [Preference::SlowReader, Preference::FastReader] {
        for len in [64, 512] {
            for readers in [1, 2, 4, 8] {
                // The best of three: the machine is shared, noise only adds.
                let ns = (0..3)
                    .map(|_| {
                        let (ns, lost) = run(pref, readers, len, packets);
                        assert_eq!(lost, 0, "the bench must not lose packets");
                        ns
                    })
                    .fold(f64::INFINITY, f64::min);
                println!(
                    "{:<12} {:>6} {:>8} {:>10.1} {:>14.1}",
                    match pref {
                        Preference::SlowReader => "slow-reader",
                        Preference::FastReader => "fast-reader",
                    },
                    len,
                    readers,
                    ns,
                    ns / readers as f64
                );
            }
        }
    }
}
