//! Link-layer header types as stored in pcap and pcapng files.
//!
//! [`LinkType`] holds a `LINKTYPE_*` value (the file-format registry, see
//! <https://www.tcpdump.org/linktypes.html>). libpcap exposes the same things
//! to programs as `DLT_*` values, which are identical except for a few
//! historical platform-specific numbers; [`LinkType::dlt`] and
//! [`LinkType::from_dlt`] convert using the Linux `DLT_*` values.

use core::fmt;

/// A pcap `LINKTYPE_*` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u32);

/// `(linktype, libpcap DLT name, LINKTYPE name, description)`.
const TABLE: &[(u32, &str, &str, &str)] = &[
    (0, "NULL", "NULL", "BSD loopback"),
    (1, "EN10MB", "ETHERNET", "Ethernet"),
    (3, "AX25", "AX25", "AX.25 layer 2"),
    (6, "IEEE802", "IEEE802_5", "Token ring"),
    (7, "ARCNET", "ARCNET_BSD", "BSD ARCNET"),
    (8, "SLIP", "SLIP", "SLIP"),
    (9, "PPP", "PPP", "PPP"),
    (10, "FDDI", "FDDI", "FDDI"),
    (50, "PPP_SERIAL", "PPP_HDLC", "PPP over serial"),
    (51, "PPP_ETHER", "PPP_ETHER", "PPPoE"),
    (
        99,
        "SYMANTEC_FIREWALL",
        "SYMANTEC_FIREWALL",
        "Symantec Firewall",
    ),
    (
        100,
        "ATM_RFC1483",
        "ATM_RFC1483",
        "RFC 1483 LLC-encapsulated ATM",
    ),
    (101, "RAW", "RAW", "Raw IP"),
    (102, "SLIP_BSDOS", "SLIP_BSDOS", "BSD/OS SLIP"),
    (103, "PPP_BSDOS", "PPP_BSDOS", "BSD/OS PPP"),
    (104, "C_HDLC", "C_HDLC", "Cisco HDLC"),
    (105, "IEEE802_11", "IEEE802_11", "802.11"),
    (
        106,
        "ATM_CLIP",
        "LINUX_ATM_CLIP",
        "Linux Classical IP over ATM",
    ),
    (107, "FRELAY", "FRELAY", "Frame Relay"),
    (108, "LOOP", "LOOP", "OpenBSD loopback"),
    (109, "ENC", "ENC", "OpenBSD encapsulated IP"),
    (113, "LINUX_SLL", "LINUX_SLL", "Linux cooked v1"),
    (114, "LTALK", "LTALK", "Localtalk"),
    (117, "PFLOG", "PFLOG", "OpenBSD pflog file"),
    (
        119,
        "PRISM_HEADER",
        "IEEE802_11_PRISM",
        "802.11 plus Prism header",
    ),
    (
        122,
        "IP_OVER_FC",
        "IP_OVER_FC",
        "RFC 2625 IP-over-Fibre Channel",
    ),
    (123, "SUNATM", "SUNATM", "Sun raw ATM"),
    (
        127,
        "IEEE802_11_RADIO",
        "IEEE802_11_RADIOTAP",
        "802.11 plus radiotap header",
    ),
    (129, "ARCNET_LINUX", "ARCNET_LINUX", "Linux ARCNET"),
    (
        130,
        "JUNIPER_MLPPP",
        "JUNIPER_MLPPP",
        "Juniper Multi-Link PPP",
    ),
    (
        131,
        "JUNIPER_MLFR",
        "JUNIPER_MLFR",
        "Juniper Multi-Link Frame Relay",
    ),
    (
        132,
        "JUNIPER_ES",
        "JUNIPER_ES",
        "Juniper Encryption Services PIC",
    ),
    (133, "JUNIPER_GGSN", "JUNIPER_GGSN", "Juniper GGSN PIC"),
    (
        134,
        "JUNIPER_MFR",
        "JUNIPER_MFR",
        "Juniper FRF.16 Frame Relay",
    ),
    (135, "JUNIPER_ATM2", "JUNIPER_ATM2", "Juniper ATM2 PIC"),
    (
        136,
        "JUNIPER_SERVICES",
        "JUNIPER_SERVICES",
        "Juniper Advanced Services PIC",
    ),
    (137, "JUNIPER_ATM1", "JUNIPER_ATM1", "Juniper ATM1 PIC"),
    (
        138,
        "APPLE_IP_OVER_IEEE1394",
        "APPLE_IP_OVER_IEEE1394",
        "Apple IP-over-IEEE 1394",
    ),
    (
        139,
        "MTP2_WITH_PHDR",
        "MTP2_WITH_PHDR",
        "SS7 MTP2 with Pseudo-header",
    ),
    (140, "MTP2", "MTP2", "SS7 MTP2"),
    (141, "MTP3", "MTP3", "SS7 MTP3"),
    (142, "SCCP", "SCCP", "SS7 SCCP"),
    (143, "DOCSIS", "DOCSIS", "DOCSIS"),
    (144, "LINUX_IRDA", "LINUX_IRDA", "Linux IrDA"),
    (147, "USER0", "USER0", "DLT 147"),
    (148, "USER1", "USER1", "DLT 148"),
    (149, "USER2", "USER2", "DLT 149"),
    (150, "USER3", "USER3", "DLT 150"),
    (
        163,
        "IEEE802_11_RADIO_AVS",
        "IEEE802_11_AVS",
        "802.11 plus AVS radio information header",
    ),
    (
        164,
        "JUNIPER_MONITOR",
        "JUNIPER_MONITOR",
        "Juniper Passive Monitor PIC",
    ),
    (165, "BACNET_MS_TP", "BACNET_MS_TP", "BACnet MS/TP"),
    (
        166,
        "PPP_PPPD",
        "PPP_PPPD",
        "PPP for pppd, with direction flag",
    ),
    (167, "JUNIPER_PPPOE", "JUNIPER_PPPOE", "Juniper PPPoE"),
    (
        168,
        "JUNIPER_PPPOE_ATM",
        "JUNIPER_PPPOE_ATM",
        "Juniper PPPoE/ATM",
    ),
    (169, "GPRS_LLC", "GPRS_LLC", "GPRS LLC"),
    (170, "GPF_T", "GPF_T", "GPF-T"),
    (171, "GPF_F", "GPF_F", "GPF-F"),
    (
        174,
        "JUNIPER_PIC_PEER",
        "JUNIPER_PIC_PEER",
        "Juniper PIC Peer",
    ),
    (175, "ERF_ETH", "ERF_ETH", "Ethernet with Endace ERF header"),
    (
        176,
        "ERF_POS",
        "ERF_POS",
        "Packet-over-SONET with Endace ERF header",
    ),
    (177, "LINUX_LAPD", "LINUX_LAPD", "Linux vISDN LAPD"),
    (178, "JUNIPER_ETHER", "JUNIPER_ETHER", "Juniper Ethernet"),
    (179, "JUNIPER_PPP", "JUNIPER_PPP", "Juniper PPP"),
    (
        180,
        "JUNIPER_FRELAY",
        "JUNIPER_FRELAY",
        "Juniper Frame Relay",
    ),
    (181, "JUNIPER_CHDLC", "JUNIPER_CHDLC", "Juniper C-HDLC"),
    (182, "MFR", "MFR", "FRF.16 Frame Relay"),
    (183, "JUNIPER_VP", "JUNIPER_VP", "Juniper Voice PIC"),
    (184, "A429", "A429", "Arinc 429"),
    (
        185,
        "A653_ICM",
        "A653_ICM",
        "Arinc 653 Interpartition Communication",
    ),
    (186, "USB_FREEBSD", "USB_FREEBSD", "USB with FreeBSD header"),
    (
        187,
        "BLUETOOTH_HCI_H4",
        "BLUETOOTH_HCI_H4",
        "Bluetooth HCI UART transport layer",
    ),
    (
        188,
        "IEEE802_16_MAC_CPS",
        "IEEE802_16_MAC_CPS",
        "IEEE 802.16 MAC Common Part Sublayer",
    ),
    (189, "USB_LINUX", "USB_LINUX", "USB with Linux header"),
    (
        190,
        "CAN20B",
        "CAN20B",
        "Controller Area Network (CAN) v. 2.0B",
    ),
    (
        191,
        "IEEE802_15_4_LINUX",
        "IEEE802_15_4_LINUX",
        "IEEE 802.15.4 with Linux padding",
    ),
    (192, "PPI", "PPI", "Per-Packet Information"),
    (
        193,
        "IEEE802_16_MAC_CPS_RADIO",
        "IEEE802_16_MAC_CPS_RADIO",
        "IEEE 802.16 MAC Common Part Sublayer plus radiotap header",
    ),
    (
        194,
        "JUNIPER_ISM",
        "JUNIPER_ISM",
        "Juniper Integrated Service Module",
    ),
    (
        195,
        "IEEE802_15_4",
        "IEEE802_15_4_WITHFCS",
        "IEEE 802.15.4 with FCS",
    ),
    (196, "SITA", "SITA", "SITA pseudo-header"),
    (197, "ERF", "ERF", "Endace ERF header"),
    (
        198,
        "RAIF1",
        "RAIF1",
        "Ethernet with u10 Networks pseudo-header",
    ),
    (
        199,
        "IPMB_KONTRON",
        "IPMB_KONTRON",
        "IPMB with Kontron pseudo-header",
    ),
    (200, "JUNIPER_ST", "JUNIPER_ST", "Juniper Secure Tunnel"),
    (
        201,
        "BLUETOOTH_HCI_H4_WITH_PHDR",
        "BLUETOOTH_HCI_H4_WITH_PHDR",
        "Bluetooth HCI UART transport layer plus pseudo-header",
    ),
    (202, "AX25_KISS", "AX25_KISS", "AX.25 with KISS header"),
    (
        209,
        "IPMB_LINUX",
        "IPMB_LINUX",
        "IPMB with Linux/Pigeon Point pseudo-header",
    ),
    (
        215,
        "IEEE802_15_4_NONASK_PHY",
        "IEEE802_15_4_NONASK_PHY",
        "IEEE 802.15.4 with non-ASK PHY data",
    ),
    (216, "LINUX_EVDEV", "LINUX_EVDEV", "Linux evdev events"),
    (219, "MPLS", "MPLS", "MPLS with label as link-layer header"),
    (
        220,
        "USB_LINUX_MMAPPED",
        "USB_LINUX_MMAPPED",
        "USB with padded Linux header",
    ),
    (221, "DECT", "DECT", "DECT"),
    (222, "AOS", "AOS", "AOS Space Data Link protocol"),
    (223, "WIHART", "WIHART", "Wireless HART"),
    (224, "FC_2", "FC_2", "Fibre Channel FC-2"),
    (
        225,
        "FC_2_WITH_FRAME_DELIMS",
        "FC_2_WITH_FRAME_DELIMS",
        "Fibre Channel FC-2 with frame delimiters",
    ),
    (226, "IPNET", "IPNET", "Solaris ipnet"),
    (
        227,
        "CAN_SOCKETCAN",
        "CAN_SOCKETCAN",
        "CAN-bus with SocketCAN headers",
    ),
    (228, "IPV4", "IPV4", "Raw IPv4"),
    (229, "IPV6", "IPV6", "Raw IPv6"),
    (
        230,
        "IEEE802_15_4_NOFCS",
        "IEEE802_15_4_NOFCS",
        "IEEE 802.15.4 without FCS",
    ),
    (231, "DBUS", "DBUS", "D-Bus"),
    (232, "JUNIPER_VS", "JUNIPER_VS", "Juniper Virtual Server"),
    (233, "JUNIPER_SRX_E2E", "JUNIPER_SRX_E2E", "Juniper SRX E2E"),
    (
        234,
        "JUNIPER_FIBRECHANNEL",
        "JUNIPER_FIBRECHANNEL",
        "Juniper Fibre Channel",
    ),
    (235, "DVB_CI", "DVB_CI", "DVB-CI"),
    (236, "MUX27010", "MUX27010", "MUX27010"),
    (
        237,
        "STANAG_5066_D_PDU",
        "STANAG_5066_D_PDU",
        "STANAG 5066 D_PDUs",
    ),
    (
        238,
        "JUNIPER_ATM_CEMIC",
        "JUNIPER_ATM_CEMIC",
        "Juniper ATM CEMIC",
    ),
    (239, "NFLOG", "NFLOG", "Linux netfilter log messages"),
    (
        240,
        "NETANALYZER",
        "NETANALYZER",
        "Ethernet with Hilscher netANALYZER pseudo-header",
    ),
    (
        241,
        "NETANALYZER_TRANSPARENT",
        "NETANALYZER_TRANSPARENT",
        "Ethernet with Hilscher netANALYZER pseudo-header and with preamble and SFD",
    ),
    (242, "IPOIB", "IPOIB", "RFC 4391 IP-over-Infiniband"),
    (243, "MPEG_2_TS", "MPEG_2_TS", "MPEG-2 transport stream"),
    (244, "NG40", "NG40", "ng40 protocol tester Iub/Iur"),
    (
        245,
        "NFC_LLCP",
        "NFC_LLCP",
        "NFC LLCP PDUs with pseudo-header",
    ),
    (246, "PFSYNC", "PFSYNC", "Packet filter state syncing"),
    (247, "INFINIBAND", "INFINIBAND", "InfiniBand"),
    (248, "SCTP", "SCTP", "SCTP"),
    (249, "USBPCAP", "USBPCAP", "USB with USBPcap header"),
    (
        250,
        "RTAC_SERIAL",
        "RTAC_SERIAL",
        "Schweitzer Engineering Laboratories RTAC packets",
    ),
    (
        251,
        "BLUETOOTH_LE_LL",
        "BLUETOOTH_LE_LL",
        "Bluetooth Low Energy air interface",
    ),
    (253, "NETLINK", "NETLINK", "Linux netlink"),
    (
        254,
        "BLUETOOTH_LINUX_MONITOR",
        "BLUETOOTH_LINUX_MONITOR",
        "Bluetooth Linux Monitor",
    ),
    (
        255,
        "BLUETOOTH_BREDR_BB",
        "BLUETOOTH_BREDR_BB",
        "Bluetooth Basic Rate/Enhanced Data Rate baseband packets",
    ),
    (
        256,
        "BLUETOOTH_LE_LL_WITH_PHDR",
        "BLUETOOTH_LE_LL_WITH_PHDR",
        "Bluetooth Low Energy air interface with pseudo-header",
    ),
    (
        257,
        "PROFIBUS_DL",
        "PROFIBUS_DL",
        "PROFIBUS data link layer",
    ),
    (258, "PKTAP", "PKTAP", "Apple DLT_PKTAP"),
    (
        259,
        "EPON",
        "EPON",
        "Ethernet with 802.3 Clause 65 EPON preamble",
    ),
    (260, "IPMI_HPM_2", "IPMI_HPM_2", "IPMI trace packets"),
    (
        261,
        "ZWAVE_R1_R2",
        "ZWAVE_R1_R2",
        "Z-Wave RF profile R1 and R2 packets",
    ),
    (262, "ZWAVE_R3", "ZWAVE_R3", "Z-Wave RF profile R3 packets"),
    (
        263,
        "WATTSTOPPER_DLM",
        "WATTSTOPPER_DLM",
        "WattStopper Digital Lighting Management (DLM) and Legrand Nitoo Open protocol",
    ),
    (264, "ISO_14443", "ISO_14443", "ISO 14443 messages"),
    (265, "RDS", "RDS", "IEC 62106 Radio Data System groups"),
    (266, "USB_DARWIN", "USB_DARWIN", "USB with Darwin header"),
    (267, "OPENFLOW", "OPENFLOW", "OpenBSD DLT_OPENFLOW"),
    (268, "SDLC", "SDLC", "IBM SDLC frames"),
    (
        269,
        "TI_LLN_SNIFFER",
        "TI_LLN_SNIFFER",
        "TI LLN sniffer frames",
    ),
    (271, "VSOCK", "VSOCK", "Linux vsock"),
    (
        272,
        "NORDIC_BLE",
        "NORDIC_BLE",
        "Nordic Semiconductor Bluetooth LE sniffer frames",
    ),
    (
        273,
        "DOCSIS31_XRA31",
        "DOCSIS31_XRA31",
        "Excentis XRA-31 DOCSIS 3.1 RF sniffer frames",
    ),
    (
        274,
        "ETHERNET_MPACKET",
        "ETHERNET_MPACKET",
        "802.3br mPackets",
    ),
    (
        275,
        "DISPLAYPORT_AUX",
        "DISPLAYPORT_AUX",
        "DisplayPort AUX channel monitoring data",
    ),
    (276, "LINUX_SLL2", "LINUX_SLL2", "Linux cooked v2"),
    (278, "OPENVIZSLA", "OPENVIZSLA", "OpenVizsla USB"),
    (
        279,
        "EBHSCR",
        "EBHSCR",
        "Elektrobit High Speed Capture and Replay (EBHSCR)",
    ),
    (
        280,
        "VPP_DISPATCH",
        "VPP_DISPATCH",
        "VPP graph dispatch tracer",
    ),
    (281, "DSA_TAG_BRCM", "DSA_TAG_BRCM", "Broadcom tag"),
    (
        282,
        "DSA_TAG_BRCM_PREPEND",
        "DSA_TAG_BRCM_PREPEND",
        "Broadcom tag (prepended)",
    ),
    (
        283,
        "IEEE802_15_4_TAP",
        "IEEE802_15_4_TAP",
        "IEEE 802.15.4 with pseudo-header",
    ),
    (284, "DSA_TAG_DSA", "DSA_TAG_DSA", "Marvell DSA"),
    (285, "DSA_TAG_EDSA", "DSA_TAG_EDSA", "Marvell EDSA"),
    (286, "ELEE", "ELEE", "ELEE lawful intercept packets"),
    (
        287,
        "Z_WAVE_SERIAL",
        "Z_WAVE_SERIAL",
        "Z-Wave serial frames between host and chip",
    ),
    (
        288,
        "USB_2_0",
        "USB_2_0",
        "USB 2.0/1.1/1.0 as transmitted over the cable",
    ),
    (
        289,
        "ATSC_ALP",
        "ATSC_ALP",
        "ATSC Link-Layer Protocol packets",
    ),
    (290, "ETW", "ETW", "Event Tracing for Windows messages"),
];

impl LinkType {
    /// `LINKTYPE_NULL`: BSD loopback, 4-byte address family in host order.
    pub const NULL: LinkType = LinkType(0);
    /// `LINKTYPE_ETHERNET` (DLT_EN10MB).
    pub const ETHERNET: LinkType = LinkType(1);
    /// `LINKTYPE_AX25`.
    pub const AX25: LinkType = LinkType(3);
    /// `LINKTYPE_IEEE802_5`: token ring.
    pub const IEEE802_5: LinkType = LinkType(6);
    /// `LINKTYPE_SLIP`.
    pub const SLIP: LinkType = LinkType(8);
    /// `LINKTYPE_PPP`: PPP with optional HDLC-like framing.
    pub const PPP: LinkType = LinkType(9);
    /// `LINKTYPE_FDDI`.
    pub const FDDI: LinkType = LinkType(10);
    /// `LINKTYPE_PPP_HDLC` (DLT_PPP_SERIAL).
    pub const PPP_HDLC: LinkType = LinkType(50);
    /// `LINKTYPE_PPP_ETHER`: PPPoE session without Ethernet header.
    pub const PPP_ETHER: LinkType = LinkType(51);
    /// `LINKTYPE_ATM_RFC1483`: LLC/SNAP-encapsulated ATM (DLT 11 on Linux).
    pub const ATM_RFC1483: LinkType = LinkType(100);
    /// `LINKTYPE_RAW`: raw IPv4 or IPv6, version nibble decides (DLT 12 on
    /// Linux).
    pub const RAW: LinkType = LinkType(101);
    /// `LINKTYPE_C_HDLC`: Cisco HDLC.
    pub const C_HDLC: LinkType = LinkType(104);
    /// `LINKTYPE_IEEE802_11`: 802.11 without radio header.
    pub const IEEE802_11: LinkType = LinkType(105);
    /// `LINKTYPE_FRELAY`: Frame Relay.
    pub const FRELAY: LinkType = LinkType(107);
    /// `LINKTYPE_LOOP`: OpenBSD loopback, 4-byte address family in network
    /// order.
    pub const LOOP: LinkType = LinkType(108);
    /// `LINKTYPE_LINUX_SLL`: Linux cooked capture v1 (16-byte header).
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// `LINKTYPE_PFLOG`: OpenBSD pflog.
    pub const PFLOG: LinkType = LinkType(117);
    /// `LINKTYPE_IEEE802_11_PRISM`.
    pub const IEEE802_11_PRISM: LinkType = LinkType(119);
    /// `LINKTYPE_IEEE802_11_RADIOTAP` (DLT_IEEE802_11_RADIO).
    pub const IEEE802_11_RADIOTAP: LinkType = LinkType(127);
    /// `LINKTYPE_IEEE802_11_AVS`.
    pub const IEEE802_11_AVS: LinkType = LinkType(163);
    /// `LINKTYPE_USB_LINUX`.
    pub const USB_LINUX: LinkType = LinkType(189);
    /// `LINKTYPE_PPI`: Per-Packet Information.
    pub const PPI: LinkType = LinkType(192);
    /// `LINKTYPE_IEEE802_15_4_WITHFCS`.
    pub const IEEE802_15_4_WITHFCS: LinkType = LinkType(195);
    /// `LINKTYPE_USB_LINUX_MMAPPED`.
    pub const USB_LINUX_MMAPPED: LinkType = LinkType(220);
    /// `LINKTYPE_CAN_SOCKETCAN`.
    pub const CAN_SOCKETCAN: LinkType = LinkType(227);
    /// `LINKTYPE_IPV4`: raw IPv4.
    pub const IPV4: LinkType = LinkType(228);
    /// `LINKTYPE_IPV6`: raw IPv6.
    pub const IPV6: LinkType = LinkType(229);
    /// `LINKTYPE_IEEE802_15_4_NOFCS`.
    pub const IEEE802_15_4_NOFCS: LinkType = LinkType(230);
    /// `LINKTYPE_NFLOG`: Linux netfilter log.
    pub const NFLOG: LinkType = LinkType(239);
    /// `LINKTYPE_USBPCAP`.
    pub const USBPCAP: LinkType = LinkType(249);
    /// `LINKTYPE_NETLINK`.
    pub const NETLINK: LinkType = LinkType(253);
    /// `LINKTYPE_PKTAP`: Apple PKTAP.
    pub const PKTAP: LinkType = LinkType(258);
    /// `LINKTYPE_LINUX_SLL2`: Linux cooked capture v2 (20-byte header).
    pub const LINUX_SLL2: LinkType = LinkType(276);

    fn entry(self) -> Option<&'static (u32, &'static str, &'static str, &'static str)> {
        TABLE.iter().find(|e| e.0 == self.0)
    }

    /// The libpcap `DLT_*` name without prefix, as printed by tcpdump
    /// (`"EN10MB"`, `"RAW"`, `"LINUX_SLL2"`, ...), if known.
    pub fn name(self) -> Option<&'static str> {
        self.entry().map(|e| e.1)
    }

    /// The human description tcpdump prints next to the name
    /// (`"Ethernet"`, `"Raw IP"`, `"Linux cooked v2"`, ...), if known.
    pub fn description(self) -> Option<&'static str> {
        self.entry().map(|e| e.3)
    }

    /// Looks a link type up by name, case-insensitively. Accepts the libpcap
    /// DLT name (`"EN10MB"`, `"RAW"`, `"IEEE802_11_RADIO"`), the LINKTYPE
    /// name (`"ETHERNET"`, `"IEEE802_11_RADIOTAP"`), either with an optional
    /// `DLT_` / `LINKTYPE_` prefix, and `"ethernet"`.
    pub fn from_name(name: &str) -> Option<LinkType> {
        let bare = strip_prefix_ci(name, "DLT_")
            .or_else(|| strip_prefix_ci(name, "LINKTYPE_"))
            .unwrap_or(name);
        TABLE
            .iter()
            .find(|e| e.1.eq_ignore_ascii_case(bare) || e.2.eq_ignore_ascii_case(bare))
            .map(|e| LinkType(e.0))
    }

    /// The Linux `DLT_*` value for this link type (libpcap's `linktype_to_dlt`). They are
    /// equal except `ATM_RFC1483` (LINKTYPE 100 is DLT 11), `RAW` (101 is 12), `SLIP_BSDOS`
    /// (102 is 15), `PPP_BSDOS` (103 is 16) and `ATM_CLIP` (106 is 19); `LOOP` is DLT 108 on
    /// Linux.
    pub const fn dlt(self) -> u32 {
        match self.0 {
            100 => 11,
            101 => 12,
            102 => 15,
            103 => 16,
            106 => 19,
            n => n,
        }
    }

    /// The largest snapshot length libpcap accepts for this link type
    /// (`max_snaplen_for_dlt`): 262144, except D-Bus (128 MiB), EBHSCR (8 MiB) and
    /// USBPcap (1 MiB).
    pub const fn max_snaplen(self) -> u32 {
        match self.0 {
            231 => 128 * 1024 * 1024,
            279 => 8 * 1024 * 1024,
            249 => 1024 * 1024,
            _ => 262_144,
        }
    }

    /// The snapshot length libpcap 1.10.3 gives a capture file whose header says
    /// `snaplen`: that value, unless it is 0 or negative as a C `int`; then
    /// [`LinkType::max_snaplen`].
    pub const fn savefile_snaplen(self, snaplen: u32) -> u32 {
        if snaplen == 0 || snaplen > i32::MAX as u32 {
            self.max_snaplen()
        } else {
            snaplen
        }
    }

    /// The link type for a Linux `DLT_*` value (libpcap's `dlt_to_linktype`, the inverse of
    /// [`LinkType::dlt`]; DLT 14, BSD's raw IP, is `RAW` too).
    pub const fn from_dlt(dlt: u32) -> LinkType {
        match dlt {
            11 => LinkType::ATM_RFC1483,
            12 | 14 => LinkType::RAW,
            15 => LinkType(102),
            16 => LinkType(103),
            19 => LinkType(106),
            n => LinkType(n),
        }
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix) {
        s.get(prefix.len()..)
    } else {
        None
    }
}

impl fmt::Display for LinkType {
    /// The DLT name when known, else `LINKTYPE_<number>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "LINKTYPE_{}", self.0),
        }
    }
}

impl From<u32> for LinkType {
    fn from(v: u32) -> Self {
        LinkType(v)
    }
}

impl From<LinkType> for u32 {
    fn from(v: LinkType) -> Self {
        v.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(LinkType::ETHERNET.name(), Some("EN10MB"));
        assert_eq!(LinkType::RAW.name(), Some("RAW"));
        assert_eq!(LinkType::NULL.name(), Some("NULL"));
        assert_eq!(LinkType::LOOP.name(), Some("LOOP"));
        assert_eq!(LinkType::LINUX_SLL.name(), Some("LINUX_SLL"));
        assert_eq!(LinkType::LINUX_SLL2.name(), Some("LINUX_SLL2"));
        assert_eq!(LinkType::IPV4.name(), Some("IPV4"));
        assert_eq!(LinkType::IPV6.name(), Some("IPV6"));
        assert_eq!(LinkType::PPP.name(), Some("PPP"));
        assert_eq!(LinkType::IEEE802_11.name(), Some("IEEE802_11"));
        assert_eq!(
            LinkType::IEEE802_11_RADIOTAP.name(),
            Some("IEEE802_11_RADIO")
        );
        assert_eq!(LinkType(9999).name(), None);
        assert_eq!(LinkType::ETHERNET.to_string(), "EN10MB");
        assert_eq!(LinkType(9999).to_string(), "LINKTYPE_9999");
        assert_eq!(LinkType::LINUX_SLL2.description(), Some("Linux cooked v2"));
    }

    #[test]
    fn from_name() {
        assert_eq!(LinkType::from_name("en10mb"), Some(LinkType::ETHERNET));
        assert_eq!(LinkType::from_name("ethernet"), Some(LinkType::ETHERNET));
        assert_eq!(LinkType::from_name("Ethernet"), Some(LinkType::ETHERNET));
        assert_eq!(LinkType::from_name("DLT_EN10MB"), Some(LinkType::ETHERNET));
        assert_eq!(LinkType::from_name("raw"), Some(LinkType::RAW));
        assert_eq!(LinkType::from_name("null"), Some(LinkType::NULL));
        assert_eq!(LinkType::from_name("Loop"), Some(LinkType::LOOP));
        assert_eq!(LinkType::from_name("linux_sll"), Some(LinkType::LINUX_SLL));
        assert_eq!(
            LinkType::from_name("LINUX_SLL2"),
            Some(LinkType::LINUX_SLL2)
        );
        assert_eq!(LinkType::from_name("ipv4"), Some(LinkType::IPV4));
        assert_eq!(LinkType::from_name("IPv6"), Some(LinkType::IPV6));
        assert_eq!(
            LinkType::from_name("ieee802_11_radiotap"),
            Some(LinkType::IEEE802_11_RADIOTAP)
        );
        assert_eq!(
            LinkType::from_name("LINKTYPE_IEEE802_11_RADIO"),
            Some(LinkType::IEEE802_11_RADIOTAP)
        );
        assert_eq!(LinkType::from_name("nope"), None);
        assert_eq!(LinkType::from_name(""), None);
        assert_eq!(LinkType::from_name("dlt_"), None);
        assert_eq!(LinkType::from_name("é"), None);
    }

    #[test]
    fn dlt_mapping() {
        assert_eq!(LinkType::RAW.dlt(), 12);
        assert_eq!(LinkType::LOOP.dlt(), 108);
        assert_eq!(LinkType::ETHERNET.dlt(), 1);
        assert_eq!(LinkType::LINUX_SLL2.dlt(), 276);
        assert_eq!(LinkType::from_dlt(12), LinkType::RAW);
        assert_eq!(LinkType::from_dlt(108), LinkType::LOOP);
        assert_eq!(LinkType::from_dlt(1), LinkType::ETHERNET);
        for e in TABLE {
            let lt = LinkType(e.0);
            assert_eq!(LinkType::from_dlt(lt.dlt()), lt);
            assert_eq!(LinkType::from_name(e.1), Some(lt));
            assert_eq!(LinkType::from_name(e.2), Some(lt));
        }
    }
}
