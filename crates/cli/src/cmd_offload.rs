//! `netsift offload`: compile a filter expression into NIC rules for a capability profile, print
//! them (netsift's rule notation, the paper's rules text, or the `ethtool` commands for a real
//! NIC), and optionally run a capture through the emulated NIC with the rules and the residual
//! software filter, checking that the combination gives the filter's verdict on every packet.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::program::DEFAULT_SNAPLEN;
use anyhow::{Context as _, Result, anyhow, bail};
use netsift::capture::{CaptureReader, LinkType};
use netsift::filter::Input;
use netsift::{Choice, Filter, Target};
use netsift_offload::compile::{Options, Role, compile as offload};
use netsift_offload::ethtool::{self, Verb};
use netsift_offload::nic::EmulatedNic;
use netsift_offload::{Profile, RuleTable, text};

use crate::expr;

/// Flags of `netsift offload`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The NIC's capability profile: software, 82599, 82599-fdir-perfect[:pballoc=64k|128k|256k],
    /// 82599-fdir-hash[:pballoc=…], ntuple:N, mlx5.
    #[arg(long, value_name = "PROFILE")]
    nic: String,
    /// What to print: `rules` (netsift's notation, the default), `text` (the rules text
    /// interface: `+(id,queue,proto,sip,sport,dip,dport)`), or `ethtool DEV` (the commands that
    /// install the rules on DEV; `-U` spelling with `--ethtool-u`).
    #[arg(long, num_args = 1..=2, value_names = ["KIND", "DEV"])]
    emit: Vec<String>,
    /// Spell the ethtool commands with `-U` (`--config-ntuple`) instead of `-N`.
    #[arg(long)]
    ethtool_u: bool,
    /// Steer the packets the filter may accept to this RX queue (default: RSS on the software
    /// profile, queue 0 on hardware, which cannot leave a matched packet to RSS).
    #[arg(long, value_name = "N")]
    queue: Option<u16>,
    /// Promise that the link carries no VLAN-tagged frames: rules are not checked against
    /// tagged layouts, so more of a negated filter (`not port 53`) can go to hardware.
    #[arg(long)]
    assume_untagged: bool,
    /// Run this capture (Ethernet) through the emulated NIC and the residual filter; print the
    /// fraction the NIC handled and per-rule statistics, and check the verdicts.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    read: Option<PathBuf>,
    /// Then apply this rules-text script (`+(id,queue,proto,sip,sport,dip,dport)`, `-(id)`; `-`
    /// reads standard input) to the table; with no EXPR the table starts empty.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Then serve the rules text interface on this Unix socket: each connection sends command
    /// lines and gets `ok` or `error: …` per line; a connection that sends `quit` ends serving.
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// RX queues of the emulated NIC.
    #[arg(long, default_value_t = 4, value_name = "N")]
    queues: u16,
    /// The filter expression (Ethernet).
    #[arg(
        value_name = "EXPR",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    expr: Vec<String>,
}

enum Emit {
    Rules,
    Text,
    Ethtool(String),
}

/// Run `netsift offload`.
pub fn run(mut args: Args) -> Result<ExitCode> {
    let emit = match args.emit.first().map(String::as_str) {
        None | Some("rules") => Emit::Rules,
        Some("text") => Emit::Text,
        Some("ethtool") => match args.emit.get(1) {
            Some(dev) => Emit::Ethtool(dev.clone()),
            None => bail!("--emit ethtool needs the device: --emit ethtool DEV"),
        },
        Some(other) => bail!("unknown --emit kind '{other}' (use rules, text or ethtool DEV)"),
    };
    // `--emit rules tcp …`: the second value was the expression's first word.
    if !matches!(emit, Emit::Ethtool(_))
        && let Some(word) = args.emit.get(1)
    {
        args.expr.insert(0, word.clone());
    }
    let profile: Profile = args
        .nic
        .parse()
        .map_err(|e| anyhow!("--nic {}: {e}", args.nic))?;
    if args.queues == 0 {
        bail!("--queues must be at least 1");
    }
    let text_expr = args.expr.join(" ");
    if text_expr.trim().is_empty() && args.rules.is_none() && args.control.is_none() {
        bail!("give a filter expression, --rules FILE or --control SOCKET");
    }
    // A NIC sees Ethernet frames, live.
    let target = Target::live(LinkType::ETHERNET, DEFAULT_SNAPLEN);
    let pred = expr::lower_or_report(&text_expr, &target)?;
    let mut opts = Options::new(profile);
    opts.queue = args.queue;
    opts.assume_untagged = args.assume_untagged;
    let compiled = if text_expr.trim().is_empty() {
        None
    } else {
        Some(offload(&pred, &opts).map_err(|e| anyhow!("{e}"))?)
    };

    let mut out = String::new();
    let mut table = match &compiled {
        Some(result) => {
            let roles = |role: Role| result.rules().iter().filter(|(_, r)| *r == role).count();
            let _ = writeln!(
                out,
                "# netsift offload `{text_expr}` for {profile}: {} rules ({} drop, {} allow, {} \
                 drop-rest); residual software filter: the whole expression",
                result.rules().len(),
                roles(Role::Drop),
                roles(Role::Allow),
                roles(Role::DropRest),
            );
            for note in result.notes() {
                let _ = writeln!(out, "# not offloaded: {note}");
            }
            result.table().clone()
        }
        None => RuleTable::for_profile(profile),
    };
    let mut refused = 0u64;
    if let Some(path) = &args.rules {
        let script = if path.as_os_str() == "-" {
            text::parse_reader(io::stdin().lock())
        } else {
            let f = std::fs::File::open(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            text::parse_reader(io::BufReader::new(f))
        }
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        for a in script.apply(&mut table) {
            if let Err(e) = a.result {
                refused += 1;
                eprintln!("netsift: {}: line {}: {e}", path.display(), a.line);
            }
        }
    }
    if let Some(path) = &args.control {
        // Refused commands were answered on the socket; they do not fail the command.
        let _ = serve(path, &mut table)?;
    }
    let manual = args.rules.is_some() || args.control.is_some();
    match &emit {
        Emit::Rules => match (&compiled, manual) {
            (Some(result), false) => {
                for (rule, role) in result.rules() {
                    let _ = writeln!(out, "{rule} [{role}]");
                }
            }
            _ => {
                let mut rules: Vec<_> = table.iter().map(|(r, _)| *r).collect();
                rules.sort_by_key(|r| r.id);
                for rule in rules {
                    let _ = writeln!(out, "{rule}");
                }
            }
        },
        Emit::Text => {
            let mut rules: Vec<_> = table.iter().map(|(r, _)| *r).collect();
            rules.sort_by_key(|r| r.id);
            for rule in rules {
                match text::format_rule(&rule) {
                    Ok(line) => {
                        let _ = writeln!(out, "{line}");
                    }
                    Err(e) => bail!("rule {} has no rules-text form: {}", rule.id, e.message()),
                }
            }
        }
        Emit::Ethtool(dev) => {
            let verb = if args.ethtool_u {
                Verb::ConfigNtuple
            } else {
                Verb::ConfigNfc
            };
            let cmds = ethtool::table_commands(verb, dev, &table).map_err(|e| anyhow!("{e}"))?;
            for (_, _, cmd) in cmds {
                let _ = writeln!(out, "{cmd}");
            }
        }
    }
    let stdout = io::stdout();
    let mut lock = stdout.lock();
    lock.write_all(out.as_bytes())?;
    lock.flush()?;
    drop(lock);

    if let Some(path) = &args.read {
        // Verdicts are compared only when every rule came from the compiler: rules added by
        // hand may drop what the filter accepts on purpose.
        run_capture(path, &pred, table, args.queues, &text_expr, !manual)?;
    }
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Serve the rules text interface on a Unix socket at `path` until a connection sends `quit`;
/// returns how many commands were refused.
fn serve(path: &PathBuf, table: &mut RuleTable) -> Result<u64> {
    use std::os::unix::net::UnixListener;
    if path.exists() {
        bail!(
            "{} exists: remove it or choose another path for --control",
            path.display()
        );
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
    eprintln!(
        "netsift: serving the rules text interface on {}",
        path.display()
    );
    let mut refused = 0;
    let result = (|| -> Result<()> {
        loop {
            let (stream, _) = listener.accept()?;
            let reader = io::BufReader::new(stream.try_clone()?);
            let session = text::serve(reader, &stream, table)?;
            refused += session.refused;
            if session.quit {
                return Ok(());
            }
        }
    })();
    let _ = std::fs::remove_file(path);
    result.map(|()| refused)
}

/// Run `path` through the emulated NIC and the residual filter; compare with the filter alone.
fn run_capture(
    path: &PathBuf,
    pred: &netsift::lang::Pred,
    table: netsift_offload::RuleTable,
    queues: u16,
    text_expr: &str,
    compare: bool,
) -> Result<()> {
    let mut reader =
        CaptureReader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let lt = reader.link_type().unwrap_or(LinkType::ETHERNET);
    if lt != LinkType::ETHERNET {
        bail!(
            "{}: link type {lt}: a NIC sees Ethernet frames (use an Ethernet capture)",
            path.display()
        );
    }
    // The residual software filter is the whole expression.
    let target = Target::live(LinkType::ETHERNET, DEFAULT_SNAPLEN);
    let mut filter = Filter::build(
        Input::Pred {
            pred,
            expr: text_expr,
        },
        &target,
        Choice::AUTO,
    )
    .map_err(|e| anyhow!("{e}"))?;
    let mut nic = EmulatedNic::new(queues, table);
    let (mut packets, mut accepted, mut residual_accepted) = (0u64, 0, 0);
    let mut wrong = 0u64;
    while let Some(item) = reader.next_packet() {
        let p = item.with_context(|| format!("{}", path.display()))?;
        packets += 1;
        let verdict = filter.run(p.data, p.wire_len);
        accepted += u64::from(verdict != 0);
        let delivery = nic.receive(p.data, p.wire_len);
        if !compare {
            continue;
        }
        // The residual filter is the whole filter: its verdict on a delivered packet is
        // `verdict`.
        let combined = if delivery.is_dropped() { 0 } else { verdict };
        residual_accepted += u64::from(combined != 0);
        wrong += u64::from(combined != verdict);
    }
    let s = *nic.stats();
    let pct = |n: u64| {
        if packets == 0 {
            0.0
        } else {
            100.0 * n as f64 / packets as f64
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {packets} packets; the NIC dropped {} ({:.1}%), delivered {} to \
         software; not IP: {}",
        path.display(),
        s.dropped,
        pct(s.dropped),
        s.received - s.dropped,
        s.not_ip
    );
    if compare {
        let rejected = packets - accepted;
        let _ = writeln!(
            out,
            "the filter rejects {rejected} packets ({:.1}%): the NIC handled {:.1}% of them",
            pct(rejected),
            if rejected == 0 {
                0.0
            } else {
                100.0 * s.dropped as f64 / rejected as f64
            }
        );
    }
    let per_queue: Vec<String> = nic
        .queue_stats()
        .iter()
        .enumerate()
        .map(|(i, q)| format!("q{i} {} ({} steered)", q.packets, q.steered))
        .collect();
    let _ = writeln!(out, "queues: {}", per_queue.join(", "));
    for (rule, c) in nic.table().iter() {
        let _ = writeln!(out, "  {rule}: {} packets, {} bytes", c.packets, c.bytes);
    }
    if compare {
        let _ = writeln!(
            out,
            "verdicts: NIC + residual accepted {residual_accepted}, the filter alone \
             {accepted}; {wrong} differ"
        );
    }
    eprint!("{out}");
    if wrong != 0 {
        bail!("the offloaded filter differs from the software filter on {wrong} packets");
    }
    Ok(())
}
