//! Link-layer type (DLT) and time stamp type names, as libpcap 1.10.3 spells them.
//!
//! The DLT table was produced from Debian's libpcap 1.10.3 (`pcap_datalink_val_to_name` and
//! `pcap_datalink_val_to_description` for every value below 1000), so that tools print the same
//! names on netsift's library.

/// `(DLT value, name, description)`, each string NUL-terminated, sorted by value.
pub(crate) const DLTS: &[(i32, &str, &str)] = &[
    (0, "NULL\0", "BSD loopback\0"),
    (1, "EN10MB\0", "Ethernet\0"),
    (6, "IEEE802\0", "Token ring\0"),
    (7, "ARCNET\0", "BSD ARCNET\0"),
    (8, "SLIP\0", "SLIP\0"),
    (9, "PPP\0", "PPP\0"),
    (10, "FDDI\0", "FDDI\0"),
    (11, "ATM_RFC1483\0", "RFC 1483 LLC-encapsulated ATM\0"),
    (12, "RAW\0", "Raw IP\0"),
    (15, "SLIP_BSDOS\0", "BSD/OS SLIP\0"),
    (16, "PPP_BSDOS\0", "BSD/OS PPP\0"),
    (19, "ATM_CLIP\0", "Linux Classical IP over ATM\0"),
    (50, "PPP_SERIAL\0", "PPP over serial\0"),
    (51, "PPP_ETHER\0", "PPPoE\0"),
    (99, "SYMANTEC_FIREWALL\0", "Symantec Firewall\0"),
    (104, "C_HDLC\0", "Cisco HDLC\0"),
    (105, "IEEE802_11\0", "802.11\0"),
    (107, "FRELAY\0", "Frame Relay\0"),
    (108, "LOOP\0", "OpenBSD loopback\0"),
    (109, "ENC\0", "OpenBSD encapsulated IP\0"),
    (113, "LINUX_SLL\0", "Linux cooked v1\0"),
    (114, "LTALK\0", "Localtalk\0"),
    (117, "PFLOG\0", "OpenBSD pflog file\0"),
    (119, "PRISM_HEADER\0", "802.11 plus Prism header\0"),
    (122, "IP_OVER_FC\0", "RFC 2625 IP-over-Fibre Channel\0"),
    (123, "SUNATM\0", "Sun raw ATM\0"),
    (127, "IEEE802_11_RADIO\0", "802.11 plus radiotap header\0"),
    (129, "ARCNET_LINUX\0", "Linux ARCNET\0"),
    (130, "JUNIPER_MLPPP\0", "Juniper Multi-Link PPP\0"),
    (131, "JUNIPER_MLFR\0", "Juniper Multi-Link Frame Relay\0"),
    (132, "JUNIPER_ES\0", "Juniper Encryption Services PIC\0"),
    (133, "JUNIPER_GGSN\0", "Juniper GGSN PIC\0"),
    (134, "JUNIPER_MFR\0", "Juniper FRF.16 Frame Relay\0"),
    (135, "JUNIPER_ATM2\0", "Juniper ATM2 PIC\0"),
    (136, "JUNIPER_SERVICES\0", "Juniper Advanced Services PIC\0"),
    (137, "JUNIPER_ATM1\0", "Juniper ATM1 PIC\0"),
    (138, "APPLE_IP_OVER_IEEE1394\0", "Apple IP-over-IEEE 1394\0"),
    (139, "MTP2_WITH_PHDR\0", "SS7 MTP2 with Pseudo-header\0"),
    (140, "MTP2\0", "SS7 MTP2\0"),
    (141, "MTP3\0", "SS7 MTP3\0"),
    (142, "SCCP\0", "SS7 SCCP\0"),
    (143, "DOCSIS\0", "DOCSIS\0"),
    (144, "LINUX_IRDA\0", "Linux IrDA\0"),
    (
        163,
        "IEEE802_11_RADIO_AVS\0",
        "802.11 plus AVS radio information header\0",
    ),
    (164, "JUNIPER_MONITOR\0", "Juniper Passive Monitor PIC\0"),
    (165, "BACNET_MS_TP\0", "BACnet MS/TP\0"),
    (166, "PPP_PPPD\0", "PPP for pppd, with direction flag\0"),
    (167, "JUNIPER_PPPOE\0", "Juniper PPPoE\0"),
    (168, "JUNIPER_PPPOE_ATM\0", "Juniper PPPoE/ATM\0"),
    (169, "GPRS_LLC\0", "GPRS LLC\0"),
    (170, "GPF_T\0", "GPF-T\0"),
    (171, "GPF_F\0", "GPF-F\0"),
    (174, "JUNIPER_PIC_PEER\0", "Juniper PIC Peer\0"),
    (175, "ERF_ETH\0", "Ethernet with Endace ERF header\0"),
    (
        176,
        "ERF_POS\0",
        "Packet-over-SONET with Endace ERF header\0",
    ),
    (177, "LINUX_LAPD\0", "Linux vISDN LAPD\0"),
    (178, "JUNIPER_ETHER\0", "Juniper Ethernet\0"),
    (179, "JUNIPER_PPP\0", "Juniper PPP\0"),
    (180, "JUNIPER_FRELAY\0", "Juniper Frame Relay\0"),
    (181, "JUNIPER_CHDLC\0", "Juniper C-HDLC\0"),
    (182, "MFR\0", "FRF.16 Frame Relay\0"),
    (183, "JUNIPER_VP\0", "Juniper Voice PIC\0"),
    (184, "A429\0", "Arinc 429\0"),
    (
        185,
        "A653_ICM\0",
        "Arinc 653 Interpartition Communication\0",
    ),
    (186, "USB_FREEBSD\0", "USB with FreeBSD header\0"),
    (
        187,
        "BLUETOOTH_HCI_H4\0",
        "Bluetooth HCI UART transport layer\0",
    ),
    (
        188,
        "IEEE802_16_MAC_CPS\0",
        "IEEE 802.16 MAC Common Part Sublayer\0",
    ),
    (189, "USB_LINUX\0", "USB with Linux header\0"),
    (190, "CAN20B\0", "Controller Area Network (CAN) v. 2.0B\0"),
    (
        191,
        "IEEE802_15_4_LINUX\0",
        "IEEE 802.15.4 with Linux padding\0",
    ),
    (192, "PPI\0", "Per-Packet Information\0"),
    (
        193,
        "IEEE802_16_MAC_CPS_RADIO\0",
        "IEEE 802.16 MAC Common Part Sublayer plus radiotap header\0",
    ),
    (194, "JUNIPER_ISM\0", "Juniper Integrated Service Module\0"),
    (195, "IEEE802_15_4\0", "IEEE 802.15.4 with FCS\0"),
    (196, "SITA\0", "SITA pseudo-header\0"),
    (197, "ERF\0", "Endace ERF header\0"),
    (198, "RAIF1\0", "Ethernet with u10 Networks pseudo-header\0"),
    (199, "IPMB_KONTRON\0", "IPMB with Kontron pseudo-header\0"),
    (200, "JUNIPER_ST\0", "Juniper Secure Tunnel\0"),
    (
        201,
        "BLUETOOTH_HCI_H4_WITH_PHDR\0",
        "Bluetooth HCI UART transport layer plus pseudo-header\0",
    ),
    (202, "AX25_KISS\0", "AX.25 with KISS header\0"),
    (
        209,
        "IPMB_LINUX\0",
        "IPMB with Linux/Pigeon Point pseudo-header\0",
    ),
    (
        215,
        "IEEE802_15_4_NONASK_PHY\0",
        "IEEE 802.15.4 with non-ASK PHY data\0",
    ),
    (216, "LINUX_EVDEV\0", "Linux evdev events\0"),
    (219, "MPLS\0", "MPLS with label as link-layer header\0"),
    (220, "USB_LINUX_MMAPPED\0", "USB with padded Linux header\0"),
    (221, "DECT\0", "DECT\0"),
    (222, "AOS\0", "AOS Space Data Link protocol\0"),
    (223, "WIHART\0", "Wireless HART\0"),
    (224, "FC_2\0", "Fibre Channel FC-2\0"),
    (
        225,
        "FC_2_WITH_FRAME_DELIMS\0",
        "Fibre Channel FC-2 with frame delimiters\0",
    ),
    (226, "IPNET\0", "Solaris ipnet\0"),
    (227, "CAN_SOCKETCAN\0", "CAN-bus with SocketCAN headers\0"),
    (228, "IPV4\0", "Raw IPv4\0"),
    (229, "IPV6\0", "Raw IPv6\0"),
    (230, "IEEE802_15_4_NOFCS\0", "IEEE 802.15.4 without FCS\0"),
    (231, "DBUS\0", "D-Bus\0"),
    (232, "JUNIPER_VS\0", "Juniper Virtual Server\0"),
    (233, "JUNIPER_SRX_E2E\0", "Juniper SRX E2E\0"),
    (234, "JUNIPER_FIBRECHANNEL\0", "Juniper Fibre Channel\0"),
    (235, "DVB_CI\0", "DVB-CI\0"),
    (236, "MUX27010\0", "MUX27010\0"),
    (237, "STANAG_5066_D_PDU\0", "STANAG 5066 D_PDUs\0"),
    (238, "JUNIPER_ATM_CEMIC\0", "Juniper ATM CEMIC\0"),
    (239, "NFLOG\0", "Linux netfilter log messages\0"),
    (
        240,
        "NETANALYZER\0",
        "Ethernet with Hilscher netANALYZER pseudo-header\0",
    ),
    (
        241,
        "NETANALYZER_TRANSPARENT\0",
        "Ethernet with Hilscher netANALYZER pseudo-header and with preamble and SFD\0",
    ),
    (242, "IPOIB\0", "RFC 4391 IP-over-Infiniband\0"),
    (243, "MPEG_2_TS\0", "MPEG-2 transport stream\0"),
    (244, "NG40\0", "ng40 protocol tester Iub/Iur\0"),
    (245, "NFC_LLCP\0", "NFC LLCP PDUs with pseudo-header\0"),
    (246, "PFSYNC\0", "Packet filter state syncing\0"),
    (247, "INFINIBAND\0", "InfiniBand\0"),
    (248, "SCTP\0", "SCTP\0"),
    (249, "USBPCAP\0", "USB with USBPcap header\0"),
    (
        250,
        "RTAC_SERIAL\0",
        "Schweitzer Engineering Laboratories RTAC packets\0",
    ),
    (
        251,
        "BLUETOOTH_LE_LL\0",
        "Bluetooth Low Energy air interface\0",
    ),
    (253, "NETLINK\0", "Linux netlink\0"),
    (
        254,
        "BLUETOOTH_LINUX_MONITOR\0",
        "Bluetooth Linux Monitor\0",
    ),
    (
        255,
        "BLUETOOTH_BREDR_BB\0",
        "Bluetooth Basic Rate/Enhanced Data Rate baseband packets\0",
    ),
    (
        256,
        "BLUETOOTH_LE_LL_WITH_PHDR\0",
        "Bluetooth Low Energy air interface with pseudo-header\0",
    ),
    (257, "PROFIBUS_DL\0", "PROFIBUS data link layer\0"),
    (258, "PKTAP\0", "Apple DLT_PKTAP\0"),
    (
        259,
        "EPON\0",
        "Ethernet with 802.3 Clause 65 EPON preamble\0",
    ),
    (260, "IPMI_HPM_2\0", "IPMI trace packets\0"),
    (
        261,
        "ZWAVE_R1_R2\0",
        "Z-Wave RF profile R1 and R2 packets\0",
    ),
    (262, "ZWAVE_R3\0", "Z-Wave RF profile R3 packets\0"),
    (
        263,
        "WATTSTOPPER_DLM\0",
        "WattStopper Digital Lighting Management (DLM) and Legrand Nitoo Open protocol\0",
    ),
    (264, "ISO_14443\0", "ISO 14443 messages\0"),
    (265, "RDS\0", "IEC 62106 Radio Data System groups\0"),
    (266, "USB_DARWIN\0", "USB with Darwin header\0"),
    (267, "OPENFLOW\0", "OpenBSD DLT_OPENFLOW\0"),
    (268, "SDLC\0", "IBM SDLC frames\0"),
    (269, "TI_LLN_SNIFFER\0", "TI LLN sniffer frames\0"),
    (271, "VSOCK\0", "Linux vsock\0"),
    (
        272,
        "NORDIC_BLE\0",
        "Nordic Semiconductor Bluetooth LE sniffer frames\0",
    ),
    (
        273,
        "DOCSIS31_XRA31\0",
        "Excentis XRA-31 DOCSIS 3.1 RF sniffer frames\0",
    ),
    (274, "ETHERNET_MPACKET\0", "802.3br mPackets\0"),
    (
        275,
        "DISPLAYPORT_AUX\0",
        "DisplayPort AUX channel monitoring data\0",
    ),
    (276, "LINUX_SLL2\0", "Linux cooked v2\0"),
    (278, "OPENVIZSLA\0", "OpenVizsla USB\0"),
    (
        279,
        "EBHSCR\0",
        "Elektrobit High Speed Capture and Replay (EBHSCR)\0",
    ),
    (280, "VPP_DISPATCH\0", "VPP graph dispatch tracer\0"),
    (281, "DSA_TAG_BRCM\0", "Broadcom tag\0"),
    (282, "DSA_TAG_BRCM_PREPEND\0", "Broadcom tag (prepended)\0"),
    (
        283,
        "IEEE802_15_4_TAP\0",
        "IEEE 802.15.4 with pseudo-header\0",
    ),
    (284, "DSA_TAG_DSA\0", "Marvell DSA\0"),
    (285, "DSA_TAG_EDSA\0", "Marvell EDSA\0"),
    (286, "ELEE\0", "ELEE lawful intercept packets\0"),
    (
        287,
        "Z_WAVE_SERIAL\0",
        "Z-Wave serial frames between host and chip\0",
    ),
    (
        288,
        "USB_2_0\0",
        "USB 2.0/1.1/1.0 as transmitted over the cable\0",
    ),
    (289, "ATSC_ALP\0", "ATSC Link-Layer Protocol packets\0"),
];

/// Time stamp types: `(value, name, description)`, NUL-terminated.
pub(crate) const TSTAMP_TYPES: &[(i32, &str, &str)] = &[
    (0, "host\0", "Host\0"),
    (1, "host_lowprec\0", "Host, low precision\0"),
    (2, "host_hiprec\0", "Host, high precision\0"),
    (3, "adapter\0", "Adapter\0"),
    (
        4,
        "adapter_unsynced\0",
        "Adapter, not synced with system time\0",
    ),
    (
        5,
        "host_hiprec_unsynced\0",
        "Host, high precision, not synced with system time\0",
    ),
];

/// The name and description of a DLT value.
pub(crate) fn dlt(value: i32) -> Option<(&'static str, &'static str)> {
    DLTS.binary_search_by_key(&value, |&(v, _, _)| v)
        .ok()
        .and_then(|i| DLTS.get(i))
        .map(|&(_, n, d)| (n, d))
}

/// The DLT value of a name, compared without regard to case (as libpcap does).
pub(crate) fn dlt_by_name(name: &[u8]) -> Option<i32> {
    DLTS.iter()
        .find(|(_, n, _)| trim(n).eq_ignore_ascii_case(name))
        .map(|&(v, _, _)| v)
}

/// A time stamp type's name and description.
pub(crate) fn tstamp_type(value: i32) -> Option<(&'static str, &'static str)> {
    TSTAMP_TYPES
        .iter()
        .find(|&&(v, _, _)| v == value)
        .map(|&(_, n, d)| (n, d))
}

/// The value of a time stamp type name (case-insensitive).
pub(crate) fn tstamp_type_by_name(name: &[u8]) -> Option<i32> {
    TSTAMP_TYPES
        .iter()
        .find(|(_, n, _)| trim(n).eq_ignore_ascii_case(name))
        .map(|&(v, _, _)| v)
}

/// The bytes of a NUL-terminated table string without its NUL.
fn trim(s: &str) -> &[u8] {
    s.as_bytes().strip_suffix(b"\0").unwrap_or(s.as_bytes())
}

/// libpcap's `linktype_to_dlt` on Linux: the LINKTYPE value of a file to the DLT value the API
/// reports. Most values are the same; a few historical ones differ.
pub(crate) fn linktype_to_dlt(linktype: u32) -> i32 {
    // LT_LINKTYPE: the upper bits hold FCS information.
    let dlt = netsift_capture::LinkType(linktype & 0x03ff_ffff).dlt();
    i32::try_from(dlt).unwrap_or(i32::MAX)
}

/// libpcap's `dlt_to_linktype` on Linux: the LINKTYPE value written to files for a DLT.
pub(crate) fn dlt_to_linktype(dlt: i32) -> u32 {
    u32::try_from(dlt).map_or(0, |d| netsift_capture::LinkType::from_dlt(d).0)
}

/// libpcap 1.10.3's `dlt_to_linktype` exactly: the LINKTYPE value for a DLT, or `None` (-1 in
/// libpcap: "isn't supported in savefiles") for a DLT that has none — such as the BSD-only
/// DLTs 13, 14, 17 and 18, and anything outside libpcap's table and the matching range
/// 104–289.
pub(crate) fn savefile_linktype(dlt: i32) -> Option<u32> {
    match dlt {
        0..=10 | 50 | 51 | 99 | 104..=289 => u32::try_from(dlt).ok(),
        11 | 12 | 15 | 16 | 19 => Some(dlt_to_linktype(dlt)),
        _ => None,
    }
}

/// libpcap's `max_snaplen_for_dlt`: the largest snapshot length it accepts for a link type.
pub(crate) fn max_snaplen_for_dlt(dlt: i32) -> u32 {
    netsift_capture::LinkType(dlt_to_linktype(dlt)).max_snaplen()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// netsift's own link-type table (in `netsift-wire`, used by the command line and the
    /// compiler) names and describes every DLT as libpcap 1.10.3 does.
    #[test]
    fn the_wire_table_agrees() {
        for &(v, name, desc) in DLTS {
            let lt = netsift_capture::LinkType::from_dlt(v as u32);
            assert_eq!(lt.name(), Some(trim_str(name)), "DLT {v}");
            assert_eq!(lt.description(), Some(trim_str(desc)), "DLT {v}");
            assert_eq!(
                netsift_capture::LinkType::from_name(trim_str(name)),
                Some(lt),
                "{name}"
            );
        }
    }

    fn trim_str(s: &str) -> &str {
        s.strip_suffix('\0').unwrap_or(s)
    }

    #[test]
    fn lookups() {
        assert_eq!(dlt(1), Some(("EN10MB\0", "Ethernet\0")));
        assert_eq!(dlt_by_name(b"en10mb"), Some(1));
        assert_eq!(dlt_by_name(b"RAW"), Some(12));
        assert_eq!(dlt_by_name(b"ethernet"), None);
        assert!(DLTS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(tstamp_type_by_name(b"ADAPTER"), Some(3));
        assert_eq!(linktype_to_dlt(101), 12);
        assert_eq!(dlt_to_linktype(12), 101);
        assert_eq!(linktype_to_dlt(1), 1);
        assert_eq!(savefile_linktype(12), Some(101));
        assert_eq!(savefile_linktype(14), None);
        assert_eq!(savefile_linktype(101), None);
        assert_eq!(savefile_linktype(289), Some(289));
        assert_eq!(savefile_linktype(-1), None);
    }
}
