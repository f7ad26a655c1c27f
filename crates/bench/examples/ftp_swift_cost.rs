//! Time a Swift FTPCap filter with every data connection of the FTP workload open.
use netsift_bench::ftp::FtpWorkload;
use netsift_swift::ftpcap::{DataConn, Event, SwiftFtpCap};
use std::time::Instant;

fn main() {
    let trace = FtpWorkload::paper().generate();
    let (w, mut r) = netsift_swift::open(262_144);
    let mut cap = SwiftFtpCap::new(w).unwrap();
    for c in &trace.connections {
        cap.apply(&Event::Open(DataConn {
            from: c.client,
            to: c.server,
            port: c.server_port,
        }))
        .unwrap();
    }
    for h in [true, false] {
        r.set_hierarchical(h);
        let t = Instant::now();
        let mut acc = 0u64;
        for p in &trace.packets {
            acc += u64::from(r.run(&p.data, p.wire_len) != 0);
        }
        let dt = t.elapsed().as_secs_f64();
        println!(
            "hier {h}: {acc} accepted, {:.1} ns/pkt",
            dt * 1e9 / trace.packets.len() as f64
        );
    }
}
