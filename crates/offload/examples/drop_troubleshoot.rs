//! Troubleshooting with NIC drop rules (Deri et al. §5.2).
//!
//! While troubleshooting, an operator often knows what is *noise* — DNS chatter, one host that
//! floods the link — and wants it gone before it costs CPU time. The paper installs such drop
//! rules in the NIC. Here the noise is written as a filter expression (default
//! `udp port 53 or host 198.18.0.5`, or the first command-line argument) and the compiler turns
//! the capture filter `not (NOISE)` into NIC rules: its drop rules are exactly the regions where
//! the noise matches, proved before use; the residual software filter (`not (NOISE)`, run with
//! the BPF interpreter) catches what the NIC cannot express (ARP frames of the noisy host).
//!
//! The link is promised untagged (`assume_untagged`, the mix has no VLAN tags), which lets the
//! mlx5-like profile take `host` drops. The example runs a generated mix through the emulated
//! NIC, prints the per-rule counters, the `ethtool` commands that install the same rules on a
//! real device, and the fraction of the traffic dropped in the NIC, and checks that what is left
//! after NIC + residual is exactly the complement of the noise (the packets the software filter
//! `not (NOISE)` accepts), and that the NIC never dropped a packet of that complement.
//!
//! Run with `cargo run --release -p netsift-offload --example drop_troubleshoot -- 'EXPR'`.

use netsift_capture::LinkType;
use netsift_capture::generate::Mix;
use netsift_offload::compile::{Options, compile};
use netsift_offload::ethtool::{Verb, table_commands};
use netsift_offload::{EmulatedNic, Profile};

/// The default noise.
const NOISE: &str = "udp port 53 or host 198.18.0.5";
/// Packets in the mix.
const PACKETS: usize = 40_000;

fn software_filter(expr: &str) -> Result<(netsift_lang::Pred, netsift_bpf::Filter), String> {
    let pred = netsift_lang::compile(expr, &netsift_lang::Context::new(LinkType::ETHERNET))
        .map_err(|e| format!("`{expr}`: {e}"))?;
    let prog = netsift_bpf::compile::compile(&pred, &netsift_bpf::compile::Options::default())
        .map_err(|e| format!("`{expr}`: {e}"))?;
    let filter = netsift_bpf::Filter::new(prog, netsift_bpf::Rules::Libpcap)
        .map_err(|e| format!("`{expr}`: {e}"))?;
    Ok((pred, filter))
}

/// Runs the use case for the noise expression `noise`; `quiet` suppresses the report.
pub fn run_with(noise: &str, quiet: bool) -> Result<(), String> {
    let keep_expr = format!("not ({noise})");
    let (keep, residual) = software_filter(&keep_expr)?;
    let mut opts = Options::new(Profile::Mlx5);
    opts.assume_untagged = true;
    let offload = compile(&keep, &opts).map_err(|e| e.to_string())?;
    let rules: Vec<_> = offload.rules().to_vec();
    let commands = table_commands(Verb::ConfigNfc, "eth1", offload.table())
        .map_err(|e| format!("ethtool: {e}"))?;
    let mut nic = EmulatedNic::new(4, offload.into_table());

    let mix = Mix {
        vlan_one_in: 0,
        clients: 20,
        ..Mix::default()
    };
    let packets = mix.generate(0xd0d0, PACKETS);
    let (mut left, mut complement, mut nic_wrong, mut noise_total) = (0u64, 0u64, 0u64, 0u64);
    let mut mismatch = 0u64;
    for p in &packets {
        let accepted = residual.run(&p.data, p.wire_len) != 0;
        if accepted {
            complement += 1;
        } else {
            noise_total += 1;
        }
        let delivered = !nic.receive_packet(p.as_ref()).is_dropped();
        if !delivered && accepted {
            nic_wrong += 1;
        }
        let kept = delivered && accepted;
        left += u64::from(kept);
        mismatch += u64::from(kept != accepted);
    }
    let stats = *nic.stats();
    if !quiet {
        println!("Drop rules for troubleshooting (§5.2): noise = `{noise}`, profile mlx5");
        println!("  rules (compiled from `{keep_expr}`):");
        for (rule, role) in &rules {
            let c = nic.rule_counters(rule.id).unwrap_or_default();
            println!(
                "    [{role}] {rule}: {} packets, {} bytes",
                c.packets, c.bytes
            );
        }
        for note in offload_notes(&keep, &opts) {
            println!("  note: {note}");
        }
        println!("  ethtool commands for eth1:");
        for (_, _, cmd) in &commands {
            println!("    {cmd}");
        }
        println!(
            "  {} packets: noise {noise_total}, dropped in the NIC {} ({:.1}% of all, {:.1}% of the noise)",
            stats.received,
            stats.dropped,
            100.0 * stats.dropped as f64 / stats.received.max(1) as f64,
            100.0 * stats.dropped as f64 / noise_total.max(1) as f64
        );
        println!(
            "  left after NIC + residual: {left} = complement {complement}: {}",
            if mismatch == 0 { "yes" } else { "NO" }
        );
    }
    if rules.is_empty() {
        return Err("the compiler installed no drop rule".into());
    }
    if nic_wrong > 0 {
        return Err(format!(
            "the NIC dropped {nic_wrong} packets outside the noise"
        ));
    }
    if mismatch > 0 || left != complement {
        return Err(format!(
            "{mismatch} packets differ: {left} left, complement {complement}"
        ));
    }
    if stats.dropped == 0 {
        return Err("the NIC dropped nothing".into());
    }
    Ok(())
}

fn offload_notes(pred: &netsift_lang::Pred, opts: &Options) -> Vec<String> {
    compile(pred, opts)
        .map(|o| o.notes().to_vec())
        .unwrap_or_default()
}

/// Runs the use case with the default noise expression.
#[allow(dead_code)]
pub fn run(quiet: bool) -> Result<(), String> {
    run_with(NOISE, quiet)
}

#[allow(dead_code)]
fn main() {
    let noise = std::env::args().nth(1).unwrap_or_else(|| NOISE.to_string());
    if let Err(e) = run_with(&noise, false) {
        eprintln!("drop_troubleshoot: FAILED: {e}");
        std::process::exit(1);
    }
}
