"""How a device is named (yolo.device): a GPU index read as its text is, a CUDA index kept where CUDA is, any
other device type refused in one line by every entry point."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from cfg_snippets import ONE_HEAD_CFG
from yolo.device import parse_device
from yolo.errors import ConfigError
from yolo.inference.detector import Detector
from yolo.models.model import load_model


@pytest.fixture(scope="module")
def one_cfg(tmp_path_factory) -> Path:
    cfg = tmp_path_factory.mktemp("api") / "one.cfg"
    cfg.write_text(ONE_HEAD_CFG)
    return cfg


# ------------------------------------------------------------------------------------ device
def test_a_gpu_index_is_read_as_its_text_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for index in (0, "0"):  # 0 is cuda:0, not "no device given" (which would silently pick the CPU here)
        with pytest.raises(ConfigError, match=r"^device 'cuda:0': CUDA is not available on this machine$"):
            parse_device(index)
    with pytest.raises(ConfigError, match=r"^device 'cuda:7': CUDA is not available on this machine$"):
        parse_device(np.int64(7))
    with pytest.raises(ConfigError, match=r"^device '-1' is not one of cpu, cuda, cuda:N or N$"):
        parse_device(-1)
    assert parse_device(None) == parse_device("") == torch.device("cpu")


def test_a_cuda_index_is_kept_where_cuda_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert parse_device(0) == parse_device("0") == torch.device("cuda", 0)
    assert parse_device(3) == torch.device("cuda", 3)


@pytest.mark.parametrize("device, shown", [(3.5, "float 3.5"), ([0], "list [0]"), (True, "bool True")])
def test_a_device_of_another_type_is_refused(one_cfg, device, shown):
    message = f"device must be a name (cpu, cuda, cuda:N), a GPU index or a torch.device, got {shown}"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        Detector(str(one_cfg), None, img_size=64, device=device)
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        load_model(str(one_cfg), device=device)


def test_load_model_reads_its_device_as_every_tool_does(one_cfg):
    with pytest.raises(ConfigError, match=r"^device 'gpu' is not one of cpu, cuda, cuda:N or N$"):
        load_model(str(one_cfg), device="gpu")
    assert next(load_model(str(one_cfg), device="cpu").parameters()).device == torch.device("cpu")
