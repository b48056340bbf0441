"""Datasheet figures of GPUs, each with its source (no UI, no heavy imports).

The rows of the hardware table; what a row is made of (`Figure`, `GPU`,
`SOURCES`) lives in `gpulab.hardware_model` and is re-exported here.
docs/hardware.md shows the same table with its sources and is checked
against it (tests/test_hardware.py). The rest of gpulab relies on `GPUS`,
`match_gpu(name)`, `DEFAULT_GPU` and the `GPU` fields `bandwidth_tbs`,
`tflops` (dense TFLOP/s per dtype) and `ridge`.
"""

from __future__ import annotations

import re

from gpulab.hardware_model import (
    DTYPES,
    FIELDS,
    GPU,
    SOURCES,
    UNITS,
    F,
    Figure,
    dense_fig,
    make_gpu,
    sparse_fig,
)

__all__ = [
    "DEFAULT_GPU",
    "DTYPES",
    "FIELDS",
    "GPU",
    "GPUS",
    "SOURCES",
    "UNITS",
    "Figure",
    "format_value",
    "known_names",
    "match_gpu",
]

_NO_BF16 = "no bf16 tensor cores before Ampere"
_UNPUBLISHED = "not published by NVIDIA"
_L2_B = "not on NVIDIA's B200/GB200 sheets; third-party listings only (a B200 reports 126.5 MB)"
_BRIDGE = "NVLink bridge between two (or four) cards"
_H200_L2 = (
    "NVIDIA's H200 datasheets give no L2 size (50 MB is the H100 SXM5's); "
    "an H200 SXM reports 60 MiB (benchmarks/h200-2026-11-30/probe.json)"
)
_NVL_SPARSE = "NVIDIA lists the sparse figure (twice this)"
_BW = ("blackwell-datasheet",)
_ULTRA = ("ultra-datasheet",)
_HALF = "per GPU: {} sparse, dense is half"

GPUS: dict[str, GPU] = {
    g.key: g
    for g in [
        make_gpu(
            "t4",
            "T4",
            "Turing",
            "2018",
            "GDDR6",
            {
                "memory": F(16),
                "bandwidth": F(0.32),
                "fp32": dense_fig(8.1),
                "fp16": dense_fig(65, note="FP16 tensor cores; " + _NO_BF16),
                "sms": F(40, ("derived",)),
                "l2": F(
                    4,
                    ("third-party",),
                    flag="not on the T4 datasheet; third-party die listings only",
                ),
                "tdp": F(70),
                "cc": F("7.5", ("cuda-gpus",)),
            },
            aliases=("tesla t4",),
        ),
        make_gpu(
            "v100",
            "V100 SXM2",
            "Volta",
            "2017",
            "HBM2",
            {
                "memory": F(32, note="16 or 32 GB (two SKUs)"),
                "bandwidth": F(0.90),
                "fp32": dense_fig(15.7),
                "fp16": dense_fig(125, note="FP16 tensor cores; " + _NO_BF16),
                "sms": F(80, ("whitepaper",)),
                "l2": F(6, ("whitepaper",)),
                "tdp": F(300),
                "nvlink": F(300, note="NVLink 2"),
                "cc": F("7.0", ("cuda-gpus",)),
            },
            aliases=("tesla v100", "v100-sxm2-16gb", "v100-sxm2-32gb", "tesla v100-sxm2-32gb"),
        ),
        make_gpu(
            "a10",
            "A10",
            "Ampere",
            "2021",
            "GDDR6",
            {
                "memory": F(24),
                "bandwidth": F(0.60),
                "fp32": dense_fig(31.2),
                "tf32": dense_fig(62.5),
                "fp16": dense_fig(125),
                "bf16": dense_fig(125),
                "sms": F(72, ("derived",)),
                "l2": F(
                    6, ("third-party",), flag="not on the A10 datasheet; third-party listings only"
                ),
                "tdp": F(150),
                "cc": F("8.6", ("cuda-gpus",)),
            },
        ),
        make_gpu(
            "l4",
            "L4",
            "Ada Lovelace",
            "2023",
            "GDDR6",
            {
                "memory": F(24),
                "bandwidth": F(0.30),
                "fp32": dense_fig(30.3),
                "tf32": dense_fig(60),
                "fp16": dense_fig(121),
                "bf16": dense_fig(121),
                "fp8": dense_fig(242),
                "sms": F(
                    58, ("third-party",), flag="not on the L4 datasheet; third-party listings only"
                ),
                "l2": F(
                    48, ("third-party",), flag="not on the L4 datasheet; third-party listings only"
                ),
                "tdp": F(72),
                "cc": F("8.9", ("cuda-gpus",)),
            },
            sparse={"bf16": sparse_fig(242), "fp8": sparse_fig(485)},
        ),
        make_gpu(
            "a100-40gb",
            "A100 40GB SXM",
            "Ampere",
            "2020",
            "HBM2",
            {
                "memory": F(40),
                "bandwidth": F(1.555),
                "fp32": dense_fig(19.5),
                "tf32": dense_fig(156),
                "fp16": dense_fig(312),
                "bf16": dense_fig(312),
                "sms": F(108, ("whitepaper", "kernelagent")),
                "l2": F(40, ("whitepaper", "kernelagent")),
                "tdp": F(400),
                "nvlink": F(600, note="NVLink 3"),
                "cc": F("8.0", ("cuda-gpus",)),
            },
            aliases=("a100-sxm4-40gb", "a100 sxm4 40gb", "a100 40gb sxm"),
            sparse={"bf16": sparse_fig(624)},
        ),
        make_gpu(
            "a100-80gb",
            "A100 80GB SXM",
            "Ampere",
            "2020",
            "HBM2e",
            {
                "memory": F(80),
                "bandwidth": F(2.039),
                "fp32": dense_fig(19.5),
                "tf32": dense_fig(156),
                "fp16": dense_fig(312),
                "bf16": dense_fig(312),
                "sms": F(108, ("whitepaper", "kernelagent")),
                "l2": F(40, ("whitepaper", "kernelagent")),
                "tdp": F(400),
                "nvlink": F(600, note="NVLink 3"),
                "cc": F("8.0", ("cuda-gpus",)),
            },
            aliases=("a100-sxm4-80gb", "a100 80gb", "a100"),
            sparse={"bf16": sparse_fig(624)},
        ),
        make_gpu(
            "a100-pcie-40gb",
            "A100 40GB PCIe",
            "Ampere",
            "2020",
            "HBM2",
            {
                "memory": F(40),
                "bandwidth": F(1.555),
                "fp32": dense_fig(19.5),
                "tf32": dense_fig(156),
                "fp16": dense_fig(312),
                "bf16": dense_fig(312),
                "sms": F(108, ("whitepaper", "kernelagent")),
                "l2": F(40, ("whitepaper", "kernelagent")),
                "tdp": F(250),
                "nvlink": F(600, note=_BRIDGE),
                "cc": F("8.0", ("cuda-gpus",)),
            },
            aliases=("a100-pcie-40gb", "a100 pcie 40gb", "a100 40gb pcie"),
            sparse={"bf16": sparse_fig(624)},
        ),
        make_gpu(
            "a100-pcie-80gb",
            "A100 80GB PCIe",
            "Ampere",
            "2021",
            "HBM2e",
            {
                "memory": F(80),
                "bandwidth": F(1.935),
                "fp32": dense_fig(19.5),
                "tf32": dense_fig(156),
                "fp16": dense_fig(312),
                "bf16": dense_fig(312),
                "sms": F(108, ("whitepaper", "kernelagent")),
                "l2": F(40, ("whitepaper", "kernelagent")),
                "tdp": F(300),
                "nvlink": F(600, note=_BRIDGE),
                "cc": F("8.0", ("cuda-gpus",)),
            },
            aliases=("a100 80gb pcie", "a100-pcie-80gb", "a100 pcie"),
            sparse={"bf16": sparse_fig(624)},
        ),
        make_gpu(
            "h100-sxm",
            "H100 SXM",
            "Hopper",
            "2022",
            "HBM3",
            {
                "memory": F(80),
                "bandwidth": F(3.35),
                "fp32": dense_fig(67),
                "tf32": dense_fig(494.5),
                "fp16": dense_fig(989),
                "bf16": dense_fig(989),
                "fp8": dense_fig(1979),
                "sms": F(132, ("whitepaper", "kernelagent")),
                "l2": F(50, ("whitepaper", "kernelagent")),
                "tdp": F(700),
                "nvlink": F(900, note="NVLink 4: 450 GB/s each way"),
                "cc": F("9.0", ("cuda-gpus",)),
            },
            # "h100" last: a bare H100 is most often the SXM; the NVL and PCIe cards
            # have longer names of their own, and the longest match wins.
            aliases=("h100 80gb hbm3", "h100-sxm5-80gb", "h100 sxm5", "h100"),
            sparse={
                "bf16": sparse_fig(1979, note="the figure some tables list as dense"),
                "fp8": sparse_fig(3958),
            },
        ),
        make_gpu(
            "h100-pcie",
            "H100 PCIe",
            "Hopper",
            "2022",
            "HBM2e",
            {
                "memory": F(80),
                "bandwidth": F(2.0),
                "fp32": dense_fig(51),
                "tf32": dense_fig(378),
                "fp16": dense_fig(756),
                "bf16": dense_fig(756),
                "fp8": dense_fig(1513),
                "sms": F(114, ("whitepaper", "kernelagent")),
                "l2": F(50, ("whitepaper", "kernelagent")),
                "tdp": F(350),
                "nvlink": F(600, note=_BRIDGE),
                "cc": F("9.0", ("cuda-gpus",)),
            },
            aliases=("h100 pcie", "h100-pcie-80gb"),
        ),
        make_gpu(
            "h100-nvl",
            "H100 NVL",
            "Hopper",
            "2023",
            "HBM3",
            {
                "memory": F(94),
                "bandwidth": F(3.9),
                "fp32": dense_fig(60),
                "tf32": dense_fig(417.5, note=_NVL_SPARSE),
                "fp16": dense_fig(835, note=_NVL_SPARSE),
                "bf16": dense_fig(835, note=_NVL_SPARSE),
                "fp8": dense_fig(1670, note=_NVL_SPARSE),
                "sms": F(None, note="not on the H100 NVL datasheet"),
                "l2": F(None, note="not on the H100 NVL datasheet"),
                "tdp": F(400, note="configurable, 350-400 W"),
                "nvlink": F(600, note=_BRIDGE),
                "cc": F("9.0", ("cuda-gpus",)),
            },
            aliases=("h100 nvl", "h100-nvl"),
            sparse={"bf16": sparse_fig(1671), "fp8": sparse_fig(3341)},
        ),
        make_gpu(
            "h200",
            "H200",
            "Hopper",
            "2024",
            "HBM3e",
            {
                "memory": F(141),
                "bandwidth": F(4.8),
                "fp32": dense_fig(67),
                "tf32": dense_fig(494.5),
                "fp16": dense_fig(989),
                "bf16": dense_fig(989),
                "fp8": dense_fig(1979),
                "sms": F(132, ("measured",), note="reported by the device"),
                "l2": F(60, ("measured",), note=_H200_L2),
                "tdp": F(700, note="the SXM board; NVML reported a 700 W limit (probe.json)"),
                "nvlink": F(900, note="NVLink 4: 450 GB/s each way"),
                "cc": F("9.0", ("cuda-gpus",)),
            },
            aliases=("nvidia h200", "h200 sxm", "h200 sxm5", "h200 141gb hbm3e"),
            sparse={"bf16": sparse_fig(1979), "fp8": sparse_fig(3958)},
            # gpulab's own probe on an H200 (`gpulab probe --bench --quick`, raw in
            # benchmarks/h200-2026-11-30/microbench-quick.json): a reference for
            # learners without a measurement of their own. tests/test_hardware.py
            # pins these to that file.
            measured={
                "device": "NVIDIA H200",
                "date": "2026-11-30",
                "copy_tbs": 4.25,
                "read_tbs": 4.38,
                "write_tbs": 4.64,
                "tflops": {
                    "bf16": 684.0,
                    "fp16": 662.5,
                    "tf32": 353.7,
                    "fp32": 51.3,
                    "fp8": 1311.6,
                },
                "source": "measured",
            },
        ),
        make_gpu(
            "h200-nvl",
            "H200 NVL",
            "Hopper",
            "2024",
            "HBM3e",
            {
                "memory": F(141),
                "bandwidth": F(4.8),
                "fp32": dense_fig(60),
                "tf32": dense_fig(417.5, note=_NVL_SPARSE),
                "fp16": dense_fig(835, note=_NVL_SPARSE),
                "bf16": dense_fig(835, note=_NVL_SPARSE),
                "fp8": dense_fig(1670, note=_NVL_SPARSE),
                "sms": F(None, note="not on the H200 NVL datasheet"),
                "l2": F(None, note="not on the H200 NVL datasheet"),
                "tdp": F(600, note="the PCIe card, up to 600 W: lower clocks than the 700 W SXM"),
                "nvlink": F(900, note="NVLink bridge, two- or four-way"),
                "cc": F("9.0", ("cuda-gpus",)),
            },
            aliases=("h200 nvl", "h200-nvl"),
            sparse={"bf16": sparse_fig(1671), "fp8": sparse_fig(3341)},
        ),
        # Blackwell and Blackwell Ultra: every figure is NVIDIA's per-GPU row of the
        # datasheet named in its sources (checked 2026-12-01, docs/hardware.md says
        # how). NVIDIA prints most Tensor Core rows sparse only ("dense is one-half");
        # the dense figures here are those halves, the FP4 rows print both.
        make_gpu(
            "b200",
            "B200 (HGX)",
            "Blackwell",
            "2025",
            "HBM3e",
            {
                "memory": F(
                    180,
                    (*_BW, "dgx-b200-guide"),
                    flag="180 GB on NVIDIA's Blackwell datasheet and the DGX B200 "
                    "guide (1,440 GB for 8); 192 GB in the March 2024 announcement",
                    note="'180 GB HBM3E | 7.7 TB/s' per HGX B200 GPU",
                ),
                "bandwidth": F(
                    7.7,
                    _BW,
                    flag="7.7 TB/s per HGX B200 GPU on the datasheet (62 TB/s for "
                    "8); 8 TB/s in the 2024 announcements and the DGX B200 page (64 TB/s "
                    "for 8)",
                    note="a B200 reports a 7680-bit bus at 3996 MHz: 7.67 TB/s",
                ),
                "fp32": dense_fig(
                    75,
                    *_BW,
                    "hgx-page",
                    flag="75 per HGX B200 GPU on the datasheet (600 for 8 on "
                    "the HGX table); the 80 quoted for B200 is GB200's per-GPU figure",
                ),
                "tf32": dense_fig(
                    1100,
                    *_BW,
                    "hgx-page",
                    flag="the datasheet's per-GPU '2.2 PFLOPS' (sparse) is "
                    "1100 dense; HGX B200's '18 PFLOPS' (sparse) for 8 GPUs is 1125",
                ),
                "fp16": dense_fig(2250, *_BW, note=_HALF.format("4.5 PFLOPS")),
                "bf16": dense_fig(2250, *_BW, note=_HALF.format("4.5 PFLOPS")),
                "fp8": dense_fig(4500, *_BW, note=_HALF.format("9 PFLOPS")),
                "fp4": dense_fig(
                    9000, *_BW, note="HGX B200 NVFP4 '144 | 72 PFLOPS' (sparse | dense) for 8 GPUs"
                ),
                "sms": F(None, (*_BW, "device-report"), note=_UNPUBLISHED + "; a B200 reports 148"),
                "l2": F(126, ("third-party", "device-report"), flag=_L2_B),
                "tdp": F(1000, _BW, note="'Configurable up to 1,000 W'"),
                "nvlink": F(1800, _BW, note="NVLink 5"),
                "cc": F("10.0", ("cuda-gpus",)),
            },
            aliases=("b200", "nvidia b200", "hgx b200", "dgx b200"),
            sparse={"fp8": sparse_fig(9000, *_BW), "fp4": sparse_fig(18000, *_BW)},
        ),
        make_gpu(
            "gb200",
            "GB200 (per GPU)",
            "Blackwell",
            "2025",
            "HBM3e",
            {
                "memory": F(186, _BW, note="'186 GB HBM3E | 8 TB/s' per GB200 GPU"),
                "bandwidth": F(8.0, _BW),
                "fp32": dense_fig(80, *_BW, note="per GPU; the GB200 superchip (2 GPUs) lists 160"),
                "tf32": dense_fig(1250, *_BW, note=_HALF.format("2.5 PFLOPS")),
                "fp16": dense_fig(2500, *_BW, note=_HALF.format("5 PFLOPS")),
                "bf16": dense_fig(2500, *_BW, note=_HALF.format("5 PFLOPS")),
                "fp8": dense_fig(5000, *_BW, note=_HALF.format("10 PFLOPS")),
                "fp4": dense_fig(
                    10000,
                    *_BW,
                    note="GB200 NVL72 NVFP4 '1,440 | 720 PFLOPS' (sparse | dense) for 72 GPUs",
                ),
                "sms": F(None, _BW, note=_UNPUBLISHED),
                "l2": F(126, ("third-party",), flag=_L2_B),
                "tdp": F(1200, _BW, note="'Configurable up to 1,200 W'"),
                "nvlink": F(1800, _BW, note="NVLink 5; the Grace CPU is on NVLink-C2C"),
                "cc": F("10.0", ("cuda-gpus",)),
            },
            aliases=("gb200", "gb200 nvl72"),
            sparse={"fp8": sparse_fig(10000, *_BW), "fp4": sparse_fig(20000, *_BW)},
        ),
        make_gpu(
            "b300",
            "B300 (HGX)",
            "Blackwell Ultra",
            "2025",
            "HBM3e",
            {
                "memory": F(
                    270,
                    (*_ULTRA, "hgx-page", "ultra-blog"),
                    flag="270 GB per HGX B300 GPU on the Blackwell Ultra datasheet "
                    "(2.1 TB for 8 on the HGX and DGX B300 pages); 288 GB is the package's "
                    "maximum, 'capacity varies by SKU' (NVIDIA's blog)",
                    note="'270 GB HBM3E | 7.7 TB/s' per HGX B300 GPU",
                ),
                "bandwidth": F(
                    7.7,
                    (*_ULTRA, "ultra-blog"),
                    flag="7.7 TB/s per HGX B300 GPU on the datasheet; 8 TB/s "
                    "for the Blackwell Ultra chip in NVIDIA's blog and for GB300",
                ),
                "fp32": dense_fig(
                    75, *_ULTRA, "hgx-page", note="per GPU; 600 for 8 on the HGX table"
                ),
                "tf32": dense_fig(
                    1100,
                    *_ULTRA,
                    "hgx-page",
                    flag="the datasheet's per-GPU '2.2 PFLOPS' (sparse) is "
                    "1100 dense; HGX B300's '18 PFLOPS' (sparse) for 8 GPUs is 1125",
                ),
                "fp16": dense_fig(2250, *_ULTRA, note=_HALF.format("4.5 PFLOPS")),
                "bf16": dense_fig(2250, *_ULTRA, note=_HALF.format("4.5 PFLOPS")),
                "fp8": dense_fig(4500, *_ULTRA, note=_HALF.format("9 PFLOPS")),
                "fp4": dense_fig(
                    14000,
                    *_ULTRA,
                    "hgx-page",
                    flag="the datasheet's per-GPU '18 PFLOPS | 14 PFLOPS' "
                    "(sparse | dense) gives 14,000; HGX B300's '144 | 108 PFLOPS' for 8 "
                    "GPUs gives 13,500: NVIDIA's two figures do not agree",
                ),
                "sms": F(
                    None,
                    ("ultra-blog",),
                    note="up to 160 on the full chip; 'available SM count varies by SKU'",
                ),
                "l2": F(None, _ULTRA, note=_UNPUBLISHED),
                "tdp": F(1100, _ULTRA, note="'Configurable up to 1,100 W'"),
                "nvlink": F(1800, _ULTRA, note="NVLink 5"),
                "cc": F("10.3", ("cuda-gpus",)),
            },
            aliases=("b300", "nvidia b300", "hgx b300", "dgx b300", "blackwell ultra"),
            sparse={"fp8": sparse_fig(9000, *_ULTRA), "fp4": sparse_fig(18000, *_ULTRA)},
        ),
        make_gpu(
            "gb300",
            "GB300 (per GPU)",
            "Blackwell Ultra",
            "2025",
            "HBM3e",
            {
                "memory": F(
                    279,
                    (*_ULTRA, "ultra-blog"),
                    note="'279 GB HBM3E | 8 TB/s' per GB300 GPU; 288 GB is the package's maximum",
                ),
                "bandwidth": F(8.0, _ULTRA, note="NVL72: 576 TB/s for 72 GPUs"),
                "fp32": dense_fig(80, *_ULTRA, note="per GPU"),
                "tf32": dense_fig(1250, *_ULTRA, note=_HALF.format("2.5 PFLOPS")),
                "fp16": dense_fig(2500, *_ULTRA, note=_HALF.format("5 PFLOPS")),
                "bf16": dense_fig(2500, *_ULTRA, note=_HALF.format("5 PFLOPS")),
                "fp8": dense_fig(5000, *_ULTRA, note=_HALF.format("10 PFLOPS")),
                "fp4": dense_fig(
                    15000,
                    *_ULTRA,
                    note="'20 PFLOPS | 15 PFLOPS' (sparse | dense); NVL72: "
                    "'1,440 | 1,080 PFLOPS' for 72 GPUs",
                ),
                "sms": F(
                    None,
                    ("ultra-blog",),
                    note="up to 160 on the full chip; 'available SM count varies by SKU'",
                ),
                "l2": F(None, _ULTRA, note=_UNPUBLISHED),
                "tdp": F(1400, _ULTRA, note="'up to 1,400 W'"),
                "nvlink": F(1800, _ULTRA, note="NVLink 5"),
                "cc": F("10.3", ("cuda-gpus",)),
            },
            aliases=("gb300", "gb300 nvl72"),
            sparse={"fp8": sparse_fig(10000, *_ULTRA), "fp4": sparse_fig(20000, *_ULTRA)},
        ),
        make_gpu(
            "mi300x",
            "MI300X",
            "CDNA 3",
            "2023",
            "HBM3",
            {
                "memory": F(192),
                "bandwidth": F(5.3),
                "fp32": dense_fig(
                    163.4,
                    note="vector and matrix FP32 alike; it is FP64 vector (81.7) "
                    "that is half FP64 matrix (163.4)",
                ),
                "tf32": dense_fig(653.7),
                "fp16": dense_fig(1307.4),
                "bf16": dense_fig(1307.4),
                "fp8": dense_fig(2614.9),
                "sms": F(304, ("vendor", "kernelagent"), note="compute units (CUs), not SMs"),
                "l2": F(
                    256, ("vendor", "kernelagent"), note="Infinity Cache (last level), not an L2"
                ),
                "tdp": F(750),
                "nvlink": F(896, note="AMD Infinity Fabric, 7 links × 128 GB/s: not NVLink"),
                "cc": F(
                    "gfx942", ("vendor",), note="AMD ISA target, not a CUDA compute capability"
                ),
            },
            aliases=("amd instinct mi300x", "instinct mi300x"),
            sparse={"fp8": sparse_fig(5229.8)},
        ),
        make_gpu(
            "rubin",
            "Rubin (announced)",
            "Vera Rubin",
            "2026",
            "HBM4",
            {
                "memory": F(288, ("announced",)),
                "bandwidth": F(
                    22,
                    ("announced",),
                    flag="announced, not shipped; NVIDIA's figure rose "
                    "between announcements (about 13 TB/s earlier, 22 TB/s later)",
                ),
                "fp4": dense_fig(
                    35000,
                    "announced",
                    flag="announced NVFP4 (35 PF training; 50 PF "
                    "'inference' claimed); dense/sparse basis not stated",
                    note="NVFP4",
                ),
                "sms": F(None, ("announced",), note=_UNPUBLISHED),
                "l2": F(None, ("announced",), note=_UNPUBLISHED),
                "tdp": F(None, ("announced",), note=_UNPUBLISHED),
                "nvlink": F(
                    3600,
                    ("announced",),
                    note="NVLink 6 (GPU to GPU); the Vera CPU is on NVLink-C2C",
                ),
                "cc": F(None, ("announced",), note=_UNPUBLISHED),
            },
            aliases=("vera rubin", "rubin gpu", "nvidia rubin"),
            claims={
                "fp4": Figure(
                    50000,
                    ("announced",),
                    "inference",
                    "claimed for 'inference'; basis not stated",
                    "50 PF NVFP4",
                )
            },
            announced=True,
        ),
    ]
}

DEFAULT_GPU = "h100-sxm"


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("nvidia", "").replace("_", " ").split())


def _compact(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", _norm(s))


def match_gpu(name: str) -> GPU | None:
    """Find a GPU by key, name, alias, or a device name as torch/NVML report it."""
    n = _norm(name)
    if not n:
        return None
    c = _compact(name)
    for g in GPUS.values():
        if c in (_compact(g.key), _compact(g.name), *(_compact(a) for a in g.aliases)):
            return g
    # Device names like "NVIDIA H100 80GB HBM3": the longest name contained as
    # whole words wins (so "a10" never matches inside "a100-pcie").
    best = None
    for g in GPUS.values():
        for cand in (_norm(g.name), *(_norm(a) for a in g.aliases)):
            if cand and re.search(rf"(?<![a-z0-9]){re.escape(cand)}(?![a-z0-9])", n):
                if best is None or len(cand) > best[0]:
                    best = (len(cand), g)
    return best[1] if best else None


def known_names() -> str:
    """The names `match_gpu` knows, for error messages."""
    return ", ".join(f"{g.key} ({g.name})" for g in GPUS.values())


def format_value(gpu: GPU, name: str, *, flag_mark: bool = True) -> str:
    """A figure as a short string: "989", "50 ⚑", "–" when absent, "?" when unknown."""
    f = gpu.figures.get(name)
    if f is None:
        return "–"
    if f.value is None:
        text = "?"
    elif isinstance(f.value, float) and not f.value.is_integer():
        text = f"{f.value:g}"
    elif isinstance(f.value, (int, float)):
        text = f"{int(f.value):,}"
    else:
        text = str(f.value)
    return f"{text} ⚑" if f.flag and flag_mark else text
