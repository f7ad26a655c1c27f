//! The five use cases of Deri et al. §5, run as tests: each example's `run` performs its own
//! checks and returns `Err` when one fails.

#[path = "../examples/voip_monitor.rs"]
mod voip_monitor;

#[path = "../examples/drop_troubleshoot.rs"]
mod drop_troubleshoot;

#[path = "../examples/lawful_intercept.rs"]
mod lawful_intercept;

#[path = "../examples/firewall_prefilter.rs"]
mod firewall_prefilter;

#[path = "../examples/pfreflect.rs"]
mod pfreflect;

#[test]
fn voip_monitoring_steers_each_call_to_its_queue() {
    voip_monitor::run(true).unwrap();
}

#[test]
fn troubleshooting_drop_rules_leave_the_complement() {
    drop_troubleshoot::run(true).unwrap();
}

#[test]
fn lawful_interception_delivers_only_the_subscriber() {
    lawful_intercept::run(true).unwrap();
}

#[test]
fn firewall_prefilter_keeps_the_policy() {
    firewall_prefilter::run(true).unwrap();
}

#[test]
fn pfreflect_forwards_what_the_software_filter_accepts() {
    pfreflect::run(true).unwrap();
}

#[test]
fn pfreflect_with_another_filter() {
    let cfg = pfreflect::Config {
        expr: "host 198.18.0.3 or (tcp and not port 22)".to_string(),
        read: None,
        write: None,
    };
    pfreflect::run_with(&cfg, true).unwrap();
}
