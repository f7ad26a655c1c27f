//! The standard external functions on real and malformed payloads: right answers on the
//! former, no panic (and no out-of-range output) on the latter.

use netsift_capture::generate::{FrameBuilder, TCP_ACK};
use netsift_fpl::proto;
use netsift_fpl::{NREGS, Program, Registry};
use proptest::prelude::*;

fn call(
    name: &str,
    pkt: &[u8],
    mem: &mut [u64],
    input: std::ops::Range<usize>,
    output: std::ops::Range<usize>,
) -> u64 {
    let reg = Registry::standard();
    let def = reg.get(name).unwrap();
    assert_eq!(
        (def.in_words, def.out_words),
        (input.len(), output.len()),
        "{name}"
    );
    // Go through a program, in both engines, so the function runs as filters call it.
    let src = format!("RETURN (EXTERN({name}, {}, {}))", input.start, output.start);
    let p = Program::compile(&src, &reg, mem.len()).unwrap();
    let mut regs = [0; NREGS];
    let mut copy = mem.to_vec();
    let v = p.run_interp(pkt, pkt.len() as u32, mem, &mut regs);
    if netsift_jit::available() {
        let n = p.native().unwrap();
        assert_eq!(n.run(pkt, pkt.len() as u32, &mut copy, &mut regs), v);
        assert_eq!(copy, mem);
    }
    v
}

fn tcp(payload: &[u8]) -> Vec<u8> {
    FrameBuilder::new()
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
        .tcp(554, 4000, TCP_ACK)
        .payload(payload)
        .build()
}

#[test]
fn standard_functions_on_good_input() {
    let mut mem = vec![0u64; 512];
    let p = tcp(b"RTSP/1.0 200 OK\r\nTransport: RTP/AVP;unicast;client_port=5002-5003;server_port=7000-7001\r\n\r\n");
    assert_eq!(
        call("GetDynTCPDPortFromRTSP", &p, &mut mem, 0..0, 0..0),
        5002
    );
    assert_eq!(call("GetRTSPPorts", &p, &mut mem, 0..0, 10..14), 4);
    assert_eq!(&mem[10..14], &[5002, 5003, 7000, 7001]);
    let sip = FrameBuilder::new()
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
        .udp(5060, 5060)
        .payload(b"SIP/2.0 200 OK\r\nContent-Type: application/sdp\r\n\r\nv=0\r\nc=IN IP4 198.51.100.9\r\nm=audio 30000 RTP/AVP 0\r\n")
        .build();
    assert_eq!(
        call("GetRTPPortFromSDP", &sip, &mut mem, 0..0, 20..22),
        30000
    );
    assert_eq!(&mem[20..22], &[30000, 0xc633_6409]);
    let ftp = tcp(b"227 Entering Passive Mode (10,0,0,2,200,10)\r\n");
    assert_eq!(
        call("GetFTPDataPort", &ftp, &mut mem, 0..0, 30..32),
        200 * 256 + 10
    );
    let ftp = tcp(b"229 Entering Extended Passive Mode (|||50123|)\r\n");
    assert_eq!(call("GetFTPDataPort", &ftp, &mut mem, 0..0, 30..32), 50123);
    // BoyerMoore: pattern "client_port" in MEM[40..48].
    let pat = b"client_port";
    mem[40] = pat.len() as u64;
    let mut bytes = [0u8; 56];
    bytes[..pat.len()].copy_from_slice(pat);
    for i in 0..7 {
        mem[41 + i] = u64::from_be_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
    }
    let payload = proto::payload(&p);
    let at = payload.windows(pat.len()).position(|w| w == pat).unwrap() as u64;
    assert_eq!(call("BoyerMoore", &p, &mut mem, 40..48, 0..0), at + 1);
    assert_eq!(call("AhoCorasick", &p, &mut mem, 0..0, 100..108), 4); // RTSP/1.0
    assert_eq!(mem[103], 1);
    // FlowCount then TopK.
    let mut mem = vec![0u64; 512];
    for _ in 0..3 {
        call("FlowCount", &p, &mut mem, 0..0, 0..256);
    }
    let other = FrameBuilder::new()
        .ipv4([10, 0, 0, 3], [10, 0, 0, 2])
        .udp(1, 2)
        .build();
    assert_eq!(call("FlowCount", &other, &mut mem, 0..0, 0..256), 1);
    assert_eq!(call("TopK", &p, &mut mem, 0..256, 256..272), 2);
    assert_eq!(mem[257], 3);
    assert_eq!(mem[259], 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parsers_never_panic_on_bytes(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = proto::rtsp_ports(&b);
        let _ = proto::sdp_audio(&b);
        let _ = proto::ftp_passive(&b);
        let _ = proto::flow(&b);
    }

    #[test]
    fn parsers_never_panic_on_mutated_messages(
        which in 0usize..4,
        cut in 0usize..200,
        flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..6),
    ) {
        let base: &[u8] = [
            &b"RTSP/1.0 200 OK\r\nTransport: RTP/AVP;unicast;client_port=5002-5003;server_port=7000-7001\r\n\r\n"[..],
            &b"v=0\r\nc=IN IP4 198.51.100.9\r\nm=audio 30000 RTP/AVP 0\r\n"[..],
            &b"227 Entering Passive Mode (10,0,0,2,200,10)\r\n"[..],
            &b"229 Entering Extended Passive Mode (|||50123|)\r\n"[..],
        ][which];
        let mut m = base.to_vec();
        for (i, v) in flips {
            if !m.is_empty() {
                let n = m.len();
                m[i % n] = v;
            }
        }
        m.truncate(cut);
        let frame = tcp(&m);
        let reg = Registry::standard();
        let mut mem = vec![0u64; 512];
        for name in ["GetDynTCPDPortFromRTSP", "GetRTSPPorts", "GetRTPPortFromSDP", "GetFTPDataPort", "AhoCorasick", "FlowCount"] {
            let src = format!("RETURN (EXTERN({name}, 0, 0))");
            let p = Program::compile(&src, &reg, 512).unwrap();
            let mut regs = [0; NREGS];
            let v = p.run_interp(&frame, frame.len() as u32, &mut mem, &mut regs);
            if name.starts_with("Get") {
                prop_assert!(v <= 65535);
            }
            // Truncated frames too.
            let _ = p.run_interp(&frame[..frame.len().min(cut)], 0, &mut mem, &mut regs);
        }
    }
}
