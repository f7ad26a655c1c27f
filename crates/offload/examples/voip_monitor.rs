//! VoIP monitoring with NIC rules (Deri et al. §5.1, RTC-Mon).
//!
//! A VoIP monitor must see all signalling and the media of the calls it follows, and nothing
//! else. The paper's RTC-Mon keeps the NIC in charge of the media: SIP (UDP 5060) is steered to
//! queue 0 by a wildcard rule, the monitor parses the SIP messages read from that queue, and when
//! a call is answered it installs two **precise** rules (one per RTP direction) that steer the
//! call's media to one of the queues 1..N (chosen round-robin, so that one thread per queue
//! handles whole calls); when the call ends (`BYE`) both rules are removed. A lowest-priority
//! wildcard rule drops everything else before the CPU sees it.
//!
//! The example generates thousands of calls — `INVITE` (with the caller's SDP), `200 OK` (with
//! the callee's SDP), interleaved RTP in both directions, `BYE`, a few late RTP packets after
//! the `BYE` — mixed with unrelated TCP/UDP over IPv4 and IPv6, and feeds them through an
//! [`EmulatedNic`] with an `ntuple:1024` profile. The monitor reacts to every SIP packet it
//! receives on queue 0, exactly as RTC-Mon does. It checks that every RTP packet of an answered
//! call lands on its call's queue, that SIP lands on queue 0, and that nothing else is
//! delivered; it prints the rules added and removed, the median add/remove latency (each rule
//! operation timed with `Instant` over the whole run) and the per-queue counts.
//!
//! Run with `cargo run --release -p netsift-offload --example voip_monitor`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64};
use netsift_offload::rule::PROTO_UDP;
use netsift_offload::{Action, Delivery, EmulatedNic, Family, Match, Profile, Rule, RuleId};

/// RX queues: 0 for SIP, 1..QUEUES for media.
const QUEUES: u16 = 8;
/// Calls placed in the run.
const CALLS: u32 = 3000;
/// Calls in progress at the same time (at most).
const CONCURRENT: usize = 120;
/// The SIP proxy every message goes through.
const PROXY: [u8; 4] = [10, 0, 0, 1];
const SIP_PORT: u16 = 5060;

/// What the example expects the NIC to do with a generated packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// SIP: queue 0.
    Sip,
    /// RTP of an answered call: that call's queue.
    Media(u32),
    /// Anything else: dropped.
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ringing,
    Talking,
}

struct Call {
    id: u32,
    state: State,
    caller: ([u8; 4], u16),
    callee: ([u8; 4], u16),
    rtp_left: u32,
}

impl Call {
    fn new(id: u32, rng: &mut XorShift64) -> Call {
        let host = |net: u8, i: u32| [10, net, (i / 250 % 250) as u8, (i % 250) as u8 + 1];
        let port = |i: u32| 10_000 + 2 * (i % 20_000) as u16;
        Call {
            id,
            state: State::Ringing,
            caller: (host(1, id), port(id)),
            callee: (host(2, id.wrapping_mul(7)), port(id.wrapping_mul(3))),
            rtp_left: 10 + rng.below(50) as u32,
        }
    }
}

fn sip_frame(from: [u8; 4], text: &str) -> Vec<u8> {
    FrameBuilder::new()
        .ipv4(from, PROXY)
        .udp(SIP_PORT, SIP_PORT)
        .payload(text.as_bytes())
        .build()
}

fn rtp_frame(from: ([u8; 4], u16), to: ([u8; 4], u16), seq: u16) -> Vec<u8> {
    let mut rtp = [0u8; 172];
    rtp[0] = 0x80;
    rtp[2..4].copy_from_slice(&seq.to_be_bytes());
    FrameBuilder::new()
        .ipv4(from.0, to.0)
        .udp(from.1, to.1)
        .payload(&rtp)
        .build()
}

fn sdp(call: u32, first_line: &str, media: ([u8; 4], u16)) -> String {
    let ip = Ipv4Addr::from(media.0);
    format!(
        "{first_line}\r\nCall-ID: {call}@netsift\r\nContent-Type: application/sdp\r\n\r\n\
         v=0\r\nc=IN IP4 {ip}\r\nm=audio {} RTP/AVP 0\r\n",
        media.1
    )
}

/// What RTC-Mon keeps: the pending offers, the rules of each call, round-robin state and the
/// timings of every rule operation.
struct Monitor {
    offers: HashMap<u32, (Ipv4Addr, u16)>,
    calls: HashMap<u32, (u16, [RuleId; 2])>,
    next_queue: u16,
    added: u64,
    removed: u64,
    peak_rules: usize,
    add_ns: Vec<u64>,
    remove_ns: Vec<u64>,
}

/// An RTP endpoint: address and port.
type Endpoint = (Ipv4Addr, u16);

/// The media endpoint and Call-ID of a SIP message: `(method or status, call id, c= and m=)`.
fn parse_sip(payload: &[u8]) -> Option<(String, u32, Option<Endpoint>)> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut lines = text.split("\r\n");
    let first = lines.next()?;
    let kind = if first.starts_with("SIP/2.0 200") {
        "200".to_string()
    } else {
        first.split(' ').next()?.to_string()
    };
    let (mut call, mut ip, mut port) = (None, None, None);
    for line in lines {
        if let Some(v) = line.strip_prefix("Call-ID: ") {
            call = v.split('@').next()?.parse().ok();
        } else if let Some(v) = line.strip_prefix("c=IN IP4 ") {
            ip = v.parse().ok();
        } else if let Some(v) = line.strip_prefix("m=audio ") {
            port = v.split(' ').next()?.parse().ok();
        }
    }
    Some((kind, call?, ip.zip(port)))
}

fn media_rule(id: RuleId, from: (Ipv4Addr, u16), to: (Ipv4Addr, u16), queue: u16) -> Rule {
    let m = Match::new(Family::V4)
        .with_proto(PROTO_UDP)
        .try_src(IpAddr::V4(from.0), Family::V4.full_mask())
        .and_then(|m| m.try_dst(IpAddr::V4(to.0), Family::V4.full_mask()))
        .expect("IPv4 addresses in an IPv4 match")
        .with_src_port(from.1)
        .with_dst_port(to.1);
    Rule::new(id, m, Action::Queue(queue))
}

impl Monitor {
    /// Handles a SIP message read from queue 0.
    fn on_sip(&mut self, nic: &mut EmulatedNic, frame: &[u8]) -> Result<(), String> {
        let payload = frame.get(42..).ok_or("short SIP frame")?;
        let (kind, call, media) = parse_sip(payload).ok_or("unparsable SIP message")?;
        match kind.as_str() {
            "INVITE" => {
                self.offers.insert(call, media.ok_or("INVITE without SDP")?);
            }
            "200" => {
                let a = self.offers.remove(&call).ok_or("200 OK without INVITE")?;
                let b = media.ok_or("200 OK without SDP")?;
                let queue = 1 + self.next_queue;
                self.next_queue = (self.next_queue + 1) % (QUEUES - 1);
                let ids = [RuleId(1000 + 2 * call), RuleId(1001 + 2 * call)];
                for (id, (from, to)) in ids.iter().zip([(a, b), (b, a)]) {
                    let rule = media_rule(*id, from, to, queue);
                    let t = Instant::now();
                    let r = nic.install(rule);
                    self.add_ns.push(t.elapsed().as_nanos() as u64);
                    r.map_err(|e| format!("call {call}: {e}"))?;
                    self.added += 1;
                }
                self.peak_rules = self.peak_rules.max(nic.table().len());
                self.calls.insert(call, (queue, ids));
            }
            "BYE" => {
                let (_, ids) = self.calls.remove(&call).ok_or("BYE of an unknown call")?;
                for id in ids {
                    let t = Instant::now();
                    let r = nic.remove(id);
                    self.remove_ns.push(t.elapsed().as_nanos() as u64);
                    r.map_err(|e| format!("call {call}: {e}"))?;
                    self.removed += 1;
                }
            }
            other => return Err(format!("unexpected SIP message {other}")),
        }
        Ok(())
    }
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn base_rules(nic: &mut EmulatedNic) -> Result<(), String> {
    let sip = Match::new(Family::V4).with_proto(PROTO_UDP);
    let rules = [
        Rule::new(RuleId(1), sip.with_dst_port(SIP_PORT), Action::Queue(0)).with_priority(2),
        Rule::new(RuleId(2), sip.with_src_port(SIP_PORT), Action::Queue(0)).with_priority(2),
        // Lowest priority: everything else, both families, is dropped in the NIC.
        Rule::new(RuleId(3), Match::new(Family::V4), Action::Drop),
        Rule::new(RuleId(4), Match::new(Family::V6), Action::Drop),
    ];
    for r in rules {
        nic.install(r).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn noise(rng: &mut XorShift64, i: u32) -> Vec<u8> {
    let a = [198, 18, rng.below(4) as u8, rng.below(250) as u8 + 1];
    let b = [203, 0, 113, rng.below(250) as u8 + 1];
    let sport = 1024 + rng.below(60_000) as u16;
    match rng.below(4) {
        0 => FrameBuilder::new()
            .ipv4(a, b)
            .tcp(sport, 443, TCP_ACK)
            .payload(&[0; 100])
            .build(),
        1 => FrameBuilder::new().ipv4(a, b).udp(sport, 53).build(),
        // UDP between RTP-like ports of hosts that are in no call.
        2 => FrameBuilder::new()
            .ipv4(a, [10, 1, 0, 1])
            .udp(10_000 + (i % 100) as u16 * 2, 10_002)
            .payload(&[0x80; 172])
            .build(),
        _ => {
            let mut s = [0u8; 16];
            s[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
            let mut d = s;
            s[15] = 1;
            d[15] = 2;
            // SIP over IPv6 is not monitored here: dropped too.
            FrameBuilder::new()
                .ipv6(s, d)
                .udp(SIP_PORT, SIP_PORT)
                .build()
        }
    }
}

/// Runs the use case; `quiet` suppresses the report.
pub fn run(quiet: bool) -> Result<(), String> {
    let mut nic = EmulatedNic::with_profile(QUEUES, Profile::Ntuple { rules: 1024 });
    base_rules(&mut nic)?;
    let mut mon = Monitor {
        offers: HashMap::new(),
        calls: HashMap::new(),
        next_queue: 0,
        added: 0,
        removed: 0,
        peak_rules: 0,
        add_ns: Vec::new(),
        remove_ns: Vec::new(),
    };
    let mut rng = XorShift64::new(0x5195);
    let mut active: Vec<Call> = Vec::new();
    let (mut started, mut seq, mut packets) = (0u32, 0u16, 0u64);
    let mut counts: HashMap<&'static str, u64> = HashMap::new();
    let mut media_queue: HashMap<u32, u16> = HashMap::new();
    let mut failures = 0u64;
    let mut first_failure = None;
    while started < CALLS || !active.is_empty() {
        seq = seq.wrapping_add(1);
        let (frame, expect, kind) = if started < CALLS
            && active.len() < CONCURRENT
            && (active.is_empty() || rng.below(8) == 0)
        {
            let call = Call::new(started, &mut rng);
            started += 1;
            let text = sdp(call.id, "INVITE sip:bob@example.net SIP/2.0", call.caller);
            let frame = sip_frame(call.caller.0, &text);
            active.push(call);
            (frame, Expect::Sip, "sip")
        } else if rng.below(12) == 0 {
            (noise(&mut rng, u32::from(seq)), Expect::Drop, "other")
        } else {
            let at = rng.below(active.len() as u64) as usize;
            let call = &mut active[at];
            match call.state {
                State::Ringing => {
                    call.state = State::Talking;
                    let text = sdp(call.id, "SIP/2.0 200 OK", call.callee);
                    (sip_frame(call.callee.0, &text), Expect::Sip, "sip")
                }
                State::Talking if call.rtp_left > 0 => {
                    call.rtp_left -= 1;
                    let frame = if rng.below(2) == 0 {
                        rtp_frame(call.caller, call.callee, seq)
                    } else {
                        rtp_frame(call.callee, call.caller, seq)
                    };
                    (frame, Expect::Media(call.id), "rtp")
                }
                State::Talking => {
                    let call = active.swap_remove(at);
                    let text = format!(
                        "BYE sip:bob@example.net SIP/2.0\r\nCall-ID: {}@netsift\r\n\r\n",
                        call.id
                    );
                    let bye = sip_frame(call.caller.0, &text);
                    // A late RTP packet after the BYE: its rules are gone, the NIC drops it.
                    let late = rtp_frame(call.callee, call.caller, seq);
                    for (frame, expect, kind) in
                        [(bye, Expect::Sip, "sip"), (late, Expect::Drop, "late rtp")]
                    {
                        packets += 1;
                        *counts.entry(kind).or_default() += 1;
                        let got = nic.receive(&frame, frame.len() as u32);
                        if let Err(e) = check(&mut mon, &mut nic, &frame, expect, got) {
                            failures += 1;
                            first_failure.get_or_insert(e);
                        }
                    }
                    continue;
                }
            }
        };
        if let Expect::Media(call) = expect {
            // The queue the monitor gave the call must never change during the call.
            let q = mon.calls.get(&call).map(|c| c.0);
            if let Some(q) = q
                && *media_queue.entry(call).or_insert(q) != q
            {
                return Err(format!("call {call} moved queues"));
            }
        }
        packets += 1;
        *counts.entry(kind).or_default() += 1;
        let got = nic.receive(&frame, frame.len() as u32);
        if let Err(e) = check(&mut mon, &mut nic, &frame, expect, got) {
            failures += 1;
            first_failure.get_or_insert(e);
        }
    }
    let stats = *nic.stats();
    let add_med = median(&mut mon.add_ns);
    let rem_med = median(&mut mon.remove_ns);
    if !quiet {
        println!("VoIP monitoring (§5.1 RTC-Mon), profile ntuple:1024, {QUEUES} queues");
        println!(
            "  {packets} packets: {} SIP, {} RTP, {} late RTP, {} other",
            counts.get("sip").unwrap_or(&0),
            counts.get("rtp").unwrap_or(&0),
            counts.get("late rtp").unwrap_or(&0),
            counts.get("other").unwrap_or(&0)
        );
        println!(
            "  calls {CALLS}: rules added {}, removed {}, peak table size {}",
            mon.added, mon.removed, mon.peak_rules
        );
        println!("  median latency: add {add_med} ns, remove {rem_med} ns");
        println!(
            "  dropped in the NIC: {} of {} ({:.1}%)",
            stats.dropped,
            stats.received,
            100.0 * stats.dropped as f64 / stats.received.max(1) as f64
        );
        for (q, s) in nic.queue_stats().iter().enumerate() {
            let what = if q == 0 { "SIP" } else { "RTP" };
            println!(
                "  queue {q} ({what}): {} packets, {} steered",
                s.packets, s.steered
            );
        }
    }
    if failures > 0 {
        return Err(format!(
            "{failures} packets went wrong; first: {}",
            first_failure.unwrap_or_default()
        ));
    }
    if mon.added != u64::from(CALLS) * 2 || mon.removed != mon.added {
        return Err(format!(
            "expected {} rules added and removed, got {} and {}",
            2 * CALLS,
            mon.added,
            mon.removed
        ));
    }
    if nic.table().len() != 4 {
        return Err(format!(
            "{} rules left, expected the 4 base rules",
            nic.table().len()
        ));
    }
    if !quiet {
        println!("  OK: RTP on its call's queue, SIP on queue 0, nothing else delivered");
    }
    Ok(())
}

/// Checks one delivery against the expectation, then lets the monitor handle SIP.
fn check(
    mon: &mut Monitor,
    nic: &mut EmulatedNic,
    frame: &[u8],
    expect: Expect,
    got: Delivery,
) -> Result<(), String> {
    match (expect, got.queue()) {
        (Expect::Sip, Some(0)) => mon.on_sip(nic, frame),
        (Expect::Media(call), Some(q)) => match mon.calls.get(&call) {
            Some((want, _)) if *want == q => Ok(()),
            other => Err(format!(
                "RTP of call {call} on queue {q}, call's queue {:?}",
                other.map(|c| c.0)
            )),
        },
        (Expect::Drop, None) => Ok(()),
        (e, q) => Err(format!("{e:?} packet delivered on {q:?}")),
    }
}

#[allow(dead_code)]
fn main() {
    if let Err(e) = run(false) {
        eprintln!("voip_monitor: FAILED: {e}");
        std::process::exit(1);
    }
}
