//! The FTPCap replay experiment (Swift paper §5.1.1, Figs. 7-8): the FTP passive-mode workload
//! replayed in real time through a capture path while FTPCap, on another thread, follows the
//! control channel and updates the filter — in place with Swift, or by recompiling the whole
//! expression (netsift's compiler or libpcap's `pcap_compile`) and swapping the program.
//!
//! The capture path is emulated in process: the filter thread takes packet *i* when the wall
//! clock reaches its timestamp (relative to the first), as a NIC ring would deliver it, runs the
//! current filter on it, and hands what FTPCap needs (control packets; FIN and RST of data
//! connections, and their ACKs once closing) to the FTPCap thread through a channel. A data-connection packet that
//! arrives before its connection's filter is in place is rejected: a packet missed. For each
//! data connection the experiment counts the packets sent before its first captured one.
//!
//! The filter thread never waits for the updater: Swift readers are lock-free, and a recompiled
//! program is picked up with a `try_lock` when its generation counter moves.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netsift_bpf::{Filter, Rules};
use netsift_swift::ftpcap::{DataConn, Event, SwiftFtpCap, Tracker};

use crate::ftp::{FtpTrace, FtpWorkload};
use crate::libpcap::Libpcap;

/// How the filter follows the data connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updater {
    /// Swift passes added and removed in place.
    Swift,
    /// The whole expression recompiled by netsift's compiler, the program swapped.
    RecompileNetsift,
    /// The whole expression recompiled by libpcap's `pcap_compile`, the program swapped.
    RecompileLibpcap,
}

impl Updater {
    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Updater::Swift => "swift",
            Updater::RecompileNetsift => "recompile (netsift)",
            Updater::RecompileLibpcap => "recompile (libpcap)",
        }
    }
}

/// What one replay measured.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The updater.
    pub updater: Updater,
    /// Per data connection, in start order: packets sent before the first one captured (all of
    /// them when none was).
    pub missed: Vec<usize>,
    /// Per update: microseconds from the moment the filter thread handed the announcing packet
    /// over to the moment the new filter was published.
    pub update_us: Vec<f64>,
    /// Recompilations that failed (the old program stays).
    pub failed_updates: usize,
    /// Packets replayed.
    pub packets: usize,
    /// The largest lag of the filter thread behind the trace's clock, in microseconds.
    pub max_lag_us: f64,
}

/// A program published by a recompiling updater.
struct Published {
    generation: AtomicU64,
    slot: Mutex<Option<Filter>>,
}

/// The expression FTPCap recompiles: the control channel and every open data connection.
pub fn expression(open: &[DataConn]) -> String {
    let mut e = String::from("tcp port 21");
    for c in open {
        let _ = write!(e, " or ({})", c.expr());
    }
    e
}

/// Header bytes handed to FTPCap for a data-connection packet (it reads headers only).
const HEADERS: usize = 14 + 60 + 60;

/// Replay `trace` in real time with `updater`.
pub fn replay(trace: &FtpTrace, updater: Updater, lib: Option<&Libpcap>) -> Result<Replay, String> {
    if updater == Updater::RecompileLibpcap && lib.is_none() {
        return Err("libpcap is needed for the libpcap recompiling updater".into());
    }
    // Which connection each packet belongs to, and its ordinal in it (not timed).
    let mut key_of: HashMap<([u8; 4], [u8; 4], u16, u16), u32> = HashMap::new();
    for (i, c) in trace.connections.iter().enumerate() {
        key_of.insert((c.client, c.server, c.client_port, c.server_port), i as u32);
        key_of.insert((c.server, c.client, c.server_port, c.client_port), i as u32);
    }
    let mut seen = vec![0u32; trace.connections.len()];
    let owner: Vec<Option<(u32, u32)>> = trace
        .packets
        .iter()
        .map(|p| {
            let d = &p.data;
            if d.len() < 38 || d[12..14] != [8, 0] || d[23] != 6 {
                return None;
            }
            let ihl = usize::from(d[14] & 0xf) * 4;
            let ports = d.get(14 + ihl..14 + ihl + 4)?;
            let k = (
                <[u8; 4]>::try_from(&d[26..30]).ok()?,
                <[u8; 4]>::try_from(&d[30..34]).ok()?,
                u16::from_be_bytes([ports[0], ports[1]]),
                u16::from_be_bytes([ports[2], ports[3]]),
            );
            let c = *key_of.get(&k)?;
            seen[c as usize] += 1;
            Some((c, seen[c as usize] - 1))
        })
        .collect();

    let (tx, rx) = mpsc::channel::<(Vec<u8>, Instant)>();
    let done = Arc::new(AtomicBool::new(false));
    let published = Arc::new(Published {
        generation: AtomicU64::new(0),
        slot: Mutex::new(None),
    });
    let ctx = netsift_lang::Context::new(netsift_capture::LinkType::ETHERNET);
    let compile = move |expr: &str| -> Result<Filter, String> {
        match updater {
            Updater::RecompileLibpcap => {
                let p = lib.expect("checked").compile(1, 262_144, expr, true)?;
                Filter::new(p.program().clone(), Rules::Libpcap).map_err(|e| e.to_string())
            }
            _ => {
                let pred = netsift_lang::compile(expr, &ctx).map_err(|e| e.to_string())?;
                let prog =
                    netsift_bpf::compile::compile(&pred, &netsift_bpf::compile::Options::default())
                        .map_err(|e| e.to_string())?;
                Filter::new(prog, Rules::Libpcap).map_err(|e| e.to_string())
            }
        }
    };
    let (writer, mut reader) = netsift_swift::open(262_144);
    // Both filters start as the control channel alone, before the first packet.
    let swift = match updater {
        Updater::Swift => Some(SwiftFtpCap::new(writer).map_err(|e| e.to_string())?),
        _ => None,
    };
    let mut current = compile(&expression(&[]))?;

    let result = std::thread::scope(|s| -> Result<Replay, String> {
        // The FTPCap thread.
        let updater_thread = {
            let published = Arc::clone(&published);
            let done = Arc::clone(&done);
            let compile = &compile;
            s.spawn(move || -> (Vec<f64>, usize) {
                let mut tracker = Tracker::new();
                let mut swift = swift;
                let mut open: Vec<DataConn> = Vec::new();
                let (mut times, mut failed) = (Vec::new(), 0usize);
                loop {
                    // Poll, yielding the core between polls: a blocked thread takes tens of
                    // microseconds to wake on this VM, a spinning one starves the system's own
                    // threads of the core they then take from the capture thread.
                    let (frame, handed) = match rx.try_recv() {
                        Ok(x) => x,
                        Err(mpsc::TryRecvError::Empty) if !done.load(Ordering::Acquire) => {
                            std::thread::yield_now();
                            continue;
                        }
                        Err(mpsc::TryRecvError::Empty) => match rx.try_recv() {
                            Ok(x) => x,
                            Err(_) => break,
                        },
                        Err(mpsc::TryRecvError::Disconnected) => break,
                    };
                    let Some(event) = tracker.observe(&frame) else {
                        continue;
                    };
                    if let Some(sw) = &mut swift {
                        if sw.apply(&event).is_err() {
                            failed += 1;
                        }
                    } else {
                        match event {
                            Event::Open(c) => open.push(c),
                            Event::Close(c) => open.retain(|o| *o != c),
                        }
                        match compile(&expression(&open)) {
                            Ok(f) => {
                                *published.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
                                published.generation.fetch_add(1, Ordering::Release);
                            }
                            Err(_) => failed += 1,
                        }
                    }
                    if matches!(event, Event::Open(_)) {
                        times.push(handed.elapsed().as_secs_f64() * 1e6);
                    }
                }
                (times, failed)
            })
        };
        // The capture path: this thread.
        let mut first = vec![u32::MAX; trace.connections.len()];
        let mut closing = vec![false; trace.connections.len()];
        let t0 = trace.packets.first().map_or(0, |p| p.timestamp.as_nanos());
        let mut generation = 0u64;
        let mut max_lag = 0f64;
        let start = Instant::now();
        for (i, p) in trace.packets.iter().enumerate() {
            let due = Duration::from_nanos((p.timestamp.as_nanos() - t0).max(0) as u64);
            loop {
                let now = start.elapsed();
                if now >= due {
                    max_lag = max_lag.max((now - due).as_secs_f64() * 1e6);
                    break;
                }
                std::hint::spin_loop();
            }
            let verdict = match updater {
                Updater::Swift => reader.run(&p.data, p.wire_len),
                _ => {
                    let g = published.generation.load(Ordering::Acquire);
                    if g != generation
                        && let Ok(mut slot) = published.slot.try_lock()
                        && let Some(f) = slot.take()
                    {
                        current = f;
                        generation = g;
                    }
                    current.run(&p.data, p.wire_len)
                }
            };
            if verdict == 0 {
                continue;
            }
            let d = &p.data;
            if let Some((c, k)) = owner[i] {
                let f = &mut first[c as usize];
                *f = (*f).min(k);
                // FIN and RST, and once a FIN was seen the pure ACKs (the one after the second
                // FIN closes the connection): the rest of a data connection is no news for
                // FTPCap, and handing it over would queue the announcements behind it.
                let ihl = usize::from(d[14] & 0xf) * 4;
                let flags = d.get(14 + ihl + 13).copied().unwrap_or(0);
                let ip_len = usize::from(u16::from_be_bytes([d[16], d[17]]));
                let pure_ack = ip_len <= ihl + 20;
                if flags & 0x01 != 0 {
                    closing[c as usize] = true;
                }
                if flags & 0x05 != 0 || (pure_ack && closing[c as usize]) {
                    let _ = tx.send((d[..d.len().min(HEADERS)].to_vec(), Instant::now()));
                }
            } else {
                let _ = tx.send((d.to_vec(), Instant::now()));
            }
        }
        done.store(true, Ordering::Release);
        drop(tx);
        let (update_us, failed_updates) = updater_thread
            .join()
            .map_err(|_| "the FTPCap thread panicked".to_string())?;
        let missed = first
            .iter()
            .zip(&trace.connections)
            .map(|(&f, c)| if f == u32::MAX { c.packets } else { f as usize })
            .collect();
        Ok(Replay {
            updater,
            missed,
            update_us,
            failed_updates,
            packets: trace.packets.len(),
            max_lag_us: max_lag,
        })
    })?;
    Ok(result)
}

fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

/// The `netsift bench ftpcap` suite: the paper's workload, every updater, one table; when
/// `csv` is given, per-connection misses are written there (one row per connection, one column
/// per updater) for plotting.
pub fn suite(workload: &FtpWorkload, csv: Option<&std::path::Path>) -> Result<String, String> {
    let lib = Libpcap::load().ok();
    let trace = workload.generate();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite ftpcap: {} servers x {} passive-mode data connections started {} ms apart, {} \
         background pkt/s; {} packets over {:.0} ms replayed in real time{}\n",
        workload.servers,
        workload.connections,
        workload.start_interval_us as f64 / 1000.0,
        workload.background_pps,
        trace.packets.len(),
        workload.duration_ns() as f64 / 1e6,
        match &lib {
            Some(l) => format!(", baseline {}", l.version()),
            None => String::from(" (libpcap not found: its recompiling updater is skipped)"),
        }
    );
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>11} {:>11} {:>13} {:>13} {:>7} {:>9}",
        "updater",
        "no miss",
        "mean miss",
        "max miss",
        "update p50 us",
        "update p99 us",
        "failed",
        "lag us"
    );
    let mut runs = Vec::new();
    for u in [
        Updater::Swift,
        Updater::RecompileNetsift,
        Updater::RecompileLibpcap,
    ] {
        if u == Updater::RecompileLibpcap && lib.is_none() {
            continue;
        }
        let r = replay(&trace, u, lib.as_ref())?;
        let n = r.missed.len().max(1);
        let clean = r.missed.iter().filter(|&&m| m == 0).count();
        let _ = writeln!(
            out,
            "{:<20} {:>9.1}% {:>11.2} {:>11} {:>13.1} {:>13.1} {:>7} {:>9.0}",
            u.name(),
            100.0 * clean as f64 / n as f64,
            r.missed.iter().sum::<usize>() as f64 / n as f64,
            r.missed.iter().max().copied().unwrap_or(0),
            percentile(&r.update_us, 0.5),
            percentile(&r.update_us, 0.99),
            r.failed_updates,
            r.max_lag_us
        );
        runs.push(r);
    }
    if let Some(path) = csv {
        let mut s = String::from("connection");
        for r in &runs {
            let _ = write!(s, ",{}", r.updater.name());
        }
        s.push('\n');
        for i in 0..trace.connections.len() {
            let _ = write!(s, "{}", i + 1);
            for r in &runs {
                let _ = write!(s, ",{}", r.missed[i]);
            }
            s.push('\n');
        }
        std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = writeln!(out, "\nper-connection misses written to {}", path.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_replay_counts_every_connection() {
        let w = FtpWorkload {
            servers: 2,
            connections: 3,
            start_interval_us: 1_000,
            tail_us: 5_000,
            background_pps: 20_000,
            ..FtpWorkload::paper()
        };
        let trace = w.generate();
        for u in [Updater::Swift, Updater::RecompileNetsift] {
            let r = replay(&trace, u, None).unwrap();
            assert_eq!(r.missed.len(), 6);
            assert_eq!(r.update_us.len(), 6, "{u:?}: one update per connection");
            assert!(
                r.missed
                    .iter()
                    .zip(&trace.connections)
                    .all(|(&m, c)| m <= c.packets)
            );
            // Every connection is eventually captured.
            assert!(
                r.missed
                    .iter()
                    .zip(&trace.connections)
                    .all(|(&m, c)| m < c.packets)
            );
        }
    }

    #[test]
    fn expression_names_every_connection() {
        let c = DataConn {
            from: [198, 18, 20, 1],
            to: [198, 18, 10, 1],
            port: 50000,
        };
        assert_eq!(
            expression(&[c, c]),
            "tcp port 21 or (host 198.18.20.1 and host 198.18.10.1 and tcp port 50000) or \
             (host 198.18.20.1 and host 198.18.10.1 and tcp port 50000)"
        );
    }
}
