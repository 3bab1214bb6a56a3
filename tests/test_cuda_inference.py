"""Detection on CUDA against the CPU (the reference, itself checked against OpenCV DNN in test_detector.py):
device pre-processing, the Detector's detections in fp32 and fp16, CUDA graph replay, batched NMS on the
device, and exports written from a CUDA model. Every test needs CUDA and skips without it."""
import numpy as np
import pytest
import torch

from conftest import asset
from helpers import assert_same_detections
from yolo.export import export_onnx, export_torchscript
from yolo.files.images import load_image
from yolo.inference.detector import Detector
from yolo.inference.device_preprocess import preprocess_on_device
from yolo.inference.graphed import GRAPH_MAX_BATCH, GraphedForward
from yolo.inference.postprocess import PostprocessOptions, postprocess, threshold_and_nms
from yolo.inference.preprocess import preprocess
from yolo.models.model import load_model

pytestmark = pytest.mark.cuda

IMAGES = ["dog.jpg", "horses.jpg", "person.jpg", "eagle.jpg", "giraffe.jpg", "kite.jpg", "scream.jpg"]
LEVEL = 1 / 255


@pytest.fixture(scope="module")
def images():
    return [load_image(asset(f"images/{name}")) for name in IMAGES]


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
@pytest.mark.parametrize("size", [(416, 416), (320, 608), (832, 832)])
def test_device_preprocess_on_cuda_within_one_level_of_opencv(cuda_device, images, mode, size):
    expected, expected_infos = preprocess(images, size, mode, resample="opencv")
    got, infos = preprocess_on_device(images, size, mode, device=cuda_device, resample="opencv")
    assert got.device.type == cuda_device.type and got.is_contiguous(memory_format=torch.channels_last)
    assert infos == expected_infos
    assert (got.cpu() - expected).abs().max().item() <= LEVEL + 1e-6


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
@pytest.mark.parametrize("size", [(416, 416), (320, 608), (832, 832)])
def test_device_preprocess_on_cuda_equals_darknets_resize_on_the_cpu(cuda_device, images, mode, size):
    """Darknet's resampler on CUDA: the CPU path's floats exactly (no fused or reciprocal arithmetic)."""
    expected, expected_infos = preprocess(images, size, mode)
    got, infos = preprocess_on_device(images, size, mode, device=cuda_device)
    assert infos == expected_infos
    assert torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("device_preprocess", [False, True])
def test_detector_cuda_equals_cpu(cuda_device, no_tf32, yolov3_tiny, device_preprocess):
    conf = 0.25
    cpu = Detector(*yolov3_tiny, device="cpu", conf_thres=conf)
    gpu = Detector(*yolov3_tiny, device=cuda_device, conf_thres=conf, device_preprocess=device_preprocess)
    paths = [asset(f"images/{name}") for name in IMAGES]
    expected, got = cpu(paths), gpu(paths)
    assert sum(len(d["labels"]) for d in expected) > 10
    assert all(d["boxes"].device.type == "cpu" and d["boxes"].dtype == torch.float32 for d in got)
    if device_preprocess:  # inputs within one 8-bit level: detections close, not equal
        assert_same_detections(got, expected, iou_min=0.97, score_tol=0.02, margin=0.03, conf=conf)
    else:  # the same input: the same detections to float32 tolerance
        for g, e in zip(got, expected):
            assert torch.equal(g["labels"], e["labels"]) and g["names"] == e["names"]
            assert torch.allclose(g["boxes"], e["boxes"], atol=1e-2, rtol=0)
            assert torch.allclose(g["scores"], e["scores"], atol=1e-4, rtol=0)


def test_half_detections_close_to_float32(cuda_device, yolov3_tiny, images):
    conf = 0.25
    fp32 = Detector(*yolov3_tiny, device=cuda_device, conf_thres=conf)
    fp16 = Detector(*yolov3_tiny, device=cuda_device, conf_thres=conf, half=True)
    weight = next(m.weight for m in fp16.net.modules() if isinstance(m, torch.nn.Conv2d))
    assert weight.dtype == torch.float16 and weight.is_contiguous(memory_format=torch.channels_last)
    batch, _ = fp16.preprocess(images)
    assert batch.dtype == torch.float16 and batch.is_contiguous(memory_format=torch.channels_last)
    assert fp16.forward(batch).dtype == torch.float32  # heads decode in float32
    got = fp16(images)
    assert all(d["boxes"].dtype == torch.float32 for d in got)
    assert_same_detections(got, fp32(images), iou_min=0.95, score_tol=0.03, margin=0.05, conf=conf)


@pytest.mark.parametrize("half", [False, True])
def test_cuda_graph_replay_equals_eager(cuda_device, no_tf32, yolov3_tiny, images, half):
    graphed = Detector(*yolov3_tiny, device=cuda_device, half=half, cuda_graph=True)
    eager = Detector(*yolov3_tiny, device=cuda_device, half=half, cuda_graph=False)
    for batch_images in (images[:1], images[1:3], images[3:5], images[:1]):
        batch, _ = graphed.preprocess(batch_images)
        with torch.inference_mode():
            got, expected = graphed.forward(batch), eager.forward(batch)
        assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)
    # Two shapes captured (batch 1 and batch 2); the replay read each new input.
    assert len(graphed._run_net.captured) == 2
    assert [len(d["labels"]) for d in graphed(images[:2])] == [len(d["labels"]) for d in eager(images[:2])]
    big = [images[0]] * (GRAPH_MAX_BATCH + 1)  # too big to capture: eager
    with torch.inference_mode():
        batch, _ = graphed.preprocess(big)
        assert torch.allclose(graphed.forward(batch), eager.forward(batch), atol=1e-4, rtol=1e-4)
    assert len(graphed._run_net.captured) == 2


def test_graphs_follow_a_change_of_input_size(cuda_device, no_tf32, yolov3_tiny):
    # The heads cache their grids per input size: a graph captured at one size must never be replayed after
    # another size replaced those caches. Alternate sizes and compare with the eager model each time.
    net = Detector(*yolov3_tiny, device=cuda_device, cuda_graph=False).net
    graphed = GraphedForward(net)
    g = torch.Generator().manual_seed(0)
    for hw in ((320, 320), (416, 416), (320, 320), (320, 320), (416, 416)):
        x = torch.rand(2, 3, *hw, generator=g).to(cuda_device).contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            got, expected = graphed(x), net(x)
        assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)
        assert graphed.captured == [((2, 3, *hw), torch.float32)]


def test_batched_nms_on_cuda_equals_cpu(cuda_device):
    g = torch.Generator().manual_seed(0)
    pred = torch.cat((torch.rand(8, 2000, 2, generator=g) * 200, 5 + torch.rand(8, 2000, 2, generator=g) * 60,
                      torch.rand(8, 2000, 1 + 20, generator=g)), -1)
    for options in ({}, {"multi_label": True}, {"agnostic": True}, {"max_det": 5}):
        config = PostprocessOptions(0.3, 0.45, **options)
        expected = postprocess(pred, config)
        assert threshold_and_nms(pred.to(cuda_device), config).boxes.device.type == cuda_device.type
        got = postprocess(pred.to(cuda_device), config)
        for d, e in zip(got, expected):
            assert torch.equal(d["labels"].cpu(), e["labels"])
            assert torch.allclose(d["boxes"].cpu(), e["boxes"], atol=1e-4, rtol=0)


def test_export_from_cuda_model_equals_cpu_export(cuda_device, yolov3_tiny, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    cpu_model = load_model(*yolov3_tiny, device="cpu").eval()
    gpu_model = load_model(*yolov3_tiny, device=cuda_device).eval()
    x = torch.rand(2, 3, 320, 320, generator=torch.Generator().manual_seed(0))
    for name, model in (("cpu", cpu_model), ("gpu", gpu_model)):
        export_torchscript(model, tmp_path / f"{name}.torchscript", 320)
        export_onnx(model, tmp_path / f"{name}.onnx", 320)
    assert next(gpu_model.parameters()).device.type == cuda_device.type  # the model itself is left where it was
    with torch.no_grad():
        ts = [torch.jit.load(str(tmp_path / f"{n}.torchscript"))(x) for n in ("cpu", "gpu")]
    assert torch.allclose(ts[0], ts[1], atol=1e-5, rtol=0)
    outs = []
    for n in ("cpu", "gpu"):
        session = onnxruntime.InferenceSession(str(tmp_path / f"{n}.onnx"), providers=["CPUExecutionProvider"])
        outs.append(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0])
    assert np.allclose(outs[0], outs[1], atol=1e-5, rtol=0)
    with torch.no_grad():
        reference = cpu_model(x).numpy()
    assert np.abs(outs[1] - reference).max() < 1e-2
