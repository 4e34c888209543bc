#!/usr/bin/env python3
"""Generates the hwloc XML fixtures in this folder from lstopo synthetic topologies.

Synthetic topologies have no cpukinds, no I/O and equal cache sizes, so this script adds what
binding needs: L3 sizes, per-PU facts (CPUPart = Arm MIDR part, LinuxCapacity = sysfs
cpu_capacity, FrequencyMaxMHz), cpukinds, and PCI devices with their OS devices. Every object
keeps the complete_cpuset/complete_nodeset that lstopo writes (hwloc crashes without them).

Run from anywhere:  python3 tests/data/make_topologies.py   (needs lstopo-no-graphics)
Outputs: spark.xml, spark-wrong-cpukinds.xml, server-2socket.xml. this-vm.xml is a plain
`lstopo-no-graphics --of xml` of the development VM and is not generated here.
No XML comments in the output: hwloc's built-in XML parser (used when sparkrun blacklists the
libxml2 plugin for start-up speed) rejects them.
"""
import os
import subprocess
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
MB = 1024 * 1024


def synthetic(description):
    xml = subprocess.run(["lstopo-no-graphics", "--input", description, "--of", "xml"],
                         check=True, capture_output=True, text=True).stdout
    return ET.fromstring(xml)


def cpuset(cpus):
    """hwloc bitmap text: 32-bit words, most significant first, comma separated."""
    value = 0
    for c in cpus:
        value |= 1 << c
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if value == 0:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


def set_infos(obj, infos):
    """Sets <info> children, replacing existing ones of the same name, before any child object."""
    for name, value in infos:
        for old in [i for i in obj.findall("info") if i.get("name") == name]:
            obj.remove(old)
        position = len([c for c in obj if c.tag == "info"])
        obj.insert(position, ET.Element("info", name=name, value=str(value)))


class GpIndex:
    def __init__(self, root):
        self.next = 1 + max(int(o.get("gp_index", "0")) for o in root.iter("object"))

    def __call__(self):
        self.next += 1
        return str(self.next - 1)


def objects(root, kind):
    return [o for o in root.iter("object") if o.get("type") == kind]


def machine_infos(root, infos):
    machine = objects(root, "Machine")[0]
    for old in [i for i in machine.findall("info")]:
        machine.remove(old)
    set_infos(machine, infos)
    return machine


def pci(gp, busid, vendor, device, pci_class, infos, osdevs):
    """A PCIDev with OS devices [(name, osdev_type, infos)]; osdev types: 2 net, 3 OpenFabrics,
    5 co-processor."""
    dev = ET.Element("object", type="PCIDev", gp_index=gp(), pci_busid=busid,
                     pci_type="%04x [%04x:%04x] [%04x:0000] 00" % (pci_class, vendor, device, vendor),
                     pci_link_speed="15.750000")
    set_infos(dev, infos)
    for name, kind, osinfos in osdevs:
        os_obj = ET.SubElement(dev, "object", type="OSDev", gp_index=gp(), name=name,
                               osdev_type=str(kind))
        set_infos(os_obj, osinfos)
    return dev


def host_bridge(gp, domain, bus, children):
    bridge = ET.Element("object", type="Bridge", gp_index=gp(), bridge_type="0-1", depth="0",
                        bridge_pci="%04x:[%02x-%02x]" % (domain, bus, bus))
    bridge.extend(children)
    return bridge


def cpukind(root, cpus, efficiency, infos):
    kind = ET.SubElement(root, "cpukind", cpuset=cpuset(cpus), forced_efficiency=str(efficiency))
    set_infos(kind, infos)


def write(root, name):
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode")
    with open(os.path.join(HERE, name), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        f.write('<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        f.write(body + "\n")


# DGX Spark (GB10): cluster A = L3 8 MB over cpus 0-4 (Cortex-A725, 2.8 GHz) + 5-9 (Cortex-X925,
# 3.9 GHz); cluster B = L3 16 MB over 10-14 (A725, 2.86 GHz) + 15-19 (X925, 4.0 GHz).
A725, X925 = 0xD87, 0xD85


def spark_core(cpu):
    if cpu < 5:
        return A725, 718, 2808
    if cpu < 10:
        return X925, 997, 3900
    if cpu < 15:
        return A725, 731, 2860
    return X925, 1024, 4004


def spark(wrong_cpukinds):
    root = synthetic("numa:1 pack:1 l3:2 core:10 pu:1")
    gp = GpIndex(root)
    machine = machine_infos(root, [("Backend", "Linux"), ("OSName", "Linux"),
                                   ("Architecture", "aarch64"), ("HostName", "spark"),
                                   ("DMIProductName", "NVIDIA DGX Spark"), ("hwlocVersion", "2.9.0")])
    set_infos(objects(root, "Package")[0], [("CPUImplementer", "0x41"), ("CPUArchitecture", "8")])
    l3s = objects(root, "L3Cache")
    l3s[0].set("cache_size", str(8 * MB))
    l3s[1].set("cache_size", str(16 * MB))
    for pu in objects(root, "PU"):
        part, capacity, mhz = spark_core(int(pu.get("os_index")))
        set_infos(pu, [("CPUPart", "0x%x" % part), ("LinuxCapacity", capacity),
                       ("FrequencyMaxMHz", mhz)])

    # The CX7: two PCIe Gen5 x4 links (domains 0000 and 0002), two functions (ports) each.
    cx7 = [("Mellanox Technologies", "PCIVendor"), ("MT2910 Family [ConnectX-7]", "PCIDevice")]
    cx7 = [(name, value) for value, name in cx7]
    for domain, rdma_prefix, net_prefix in [(0x0000, "rocep1s0", "enp1s0"),
                                            (0x0002, "roceP2p1s0", "enP2p1s0")]:
        functions = []
        for func in (0, 1):
            functions.append(pci(gp, "%04x:01:00.%d" % (domain, func), 0x15B3, 0x1021, 0x0200, cx7, [
                ("%sf%d" % (rdma_prefix, func), 3, [("NodeGUID", "4cbb:4703:00%02x:%04x" % (domain, func))]),
                ("%sf%dnp%d" % (net_prefix, func, func), 2, [("Address", "4c:bb:47:%02x:00:%02x" % (domain, func))]),
            ]))
        machine.append(host_bridge(gp, domain, 0x01, functions))
    machine.append(host_bridge(gp, 0x000F, 0x01, [
        pci(gp, "000f:01:00.0", 0x10DE, 0x2E12, 0x0300, [("PCIVendor", "NVIDIA Corporation"),
                                                         ("PCIDevice", "GB10")],
            [("cuda0", 5, [("Backend", "CUDA"), ("GPUModel", "NVIDIA GB10")])])]))

    slow = list(range(0, 5)) + list(range(10, 15))
    fast = list(range(5, 10)) + list(range(15, 20))
    if wrong_cpukinds:
        # What frequency-based cpukinds of older hwloc look like: split by cluster, so the
        # "fast" kind holds the A725 cores 10-14 and misses the X925 cores 5-9.
        cpukind(root, range(0, 10), 1, [("FrequencyMaxMHz", 3900)])
        cpukind(root, range(10, 20), 2, [("FrequencyMaxMHz", 4004)])
    else:
        # As hwloc with MIDR-based cpukinds (hwloc PR 770) reports them.
        cpukind(root, slow, 1, [("LinuxCapacity", 718), ("CPUPart", "0xd87")])
        cpukind(root, fast, 2, [("LinuxCapacity", 997), ("CPUPart", "0xd85")])
    return root


def server():
    # 2 sockets x 8 cores x 2 threads, one L3 per socket; a dual-port ConnectX-6 Dx on socket 1.
    root = synthetic("pack:2 numa:1 l3:1 core:8 pu:2")
    gp = GpIndex(root)
    machine_infos(root, [("Backend", "Linux"), ("OSName", "Linux"), ("Architecture", "x86_64"),
                         ("HostName", "server"), ("hwlocVersion", "2.9.0")])
    for pkg in objects(root, "Package"):
        set_infos(pkg, [("CPUVendor", "GenuineIntel"), ("CPUModel", "Intel(R) Xeon(R) Gold 6338")])
    for l3 in objects(root, "L3Cache"):
        l3.set("cache_size", str(48 * MB))
    socket1 = [p for p in objects(root, "Package") if p.get("os_index") == "1"][0]
    nic = [("PCIVendor", "Mellanox Technologies"), ("PCIDevice", "MT2892 Family [ConnectX-6 Dx]")]
    socket1.append(host_bridge(gp, 0x0000, 0x81, [
        pci(gp, "0000:81:00.%d" % f, 0x15B3, 0x101D, 0x0200, nic,
            [("mlx5_%d" % f, 3, []), ("ens2f%dnp%d" % (f, f), 2, [])]) for f in (0, 1)]))
    return root


if __name__ == "__main__":
    write(spark(wrong_cpukinds=False), "spark.xml")
    write(spark(wrong_cpukinds=True), "spark-wrong-cpukinds.xml")
    write(server(), "server-2socket.xml")
