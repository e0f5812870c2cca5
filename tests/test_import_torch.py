"""Import of PyTorch CapsNets: each source architecture (gram-ai/capsule-networks and the
Udacity-style Capsule_Network notebook) built in torch here as the source code builds it (its
module names, its forward pass; smaller sizes), with random weights; its state dict saved as
.pt (and .safetensors), imported, and the outputs compared with the torch model's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is optional: pip install -e '.[torch]'")
nn = torch.nn
F = torch.nn.functional

from reportgen.capsnet.param_count import count_trainable_params  # noqa: E402
from reportgen.importers import gram_ai, import_checkpoint, udacity  # noqa: E402
from reportgen.importers.tensors import read_checkpoint  # noqa: E402
from reportgen.settings.model_params import parse_model_params  # noqa: E402

TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def _seeded_torch():
    """Every model here built from one seed: torch initialises the parameters `_scaled` leaves
    as they are (biases, the decoder) when the model is made, and an unseeded draw could fail
    the fair-test check in `_compare` (it did, once in many runs)."""
    torch.manual_seed(0)


def transposed_softmax(input, dim=1):
    """Both sources' `softmax` helper."""
    transposed = input.transpose(dim, len(input.size()) - 1)
    out = F.softmax(transposed.contiguous().view(-1, transposed.size(-1)), dim=-1)
    return out.view(*transposed.size()).transpose(dim, len(input.size()) - 1)


def squash(tensor, dim=-1):
    squared_norm = (tensor ** 2).sum(dim=dim, keepdim=True)
    scale = squared_norm / (1 + squared_norm)
    return scale * tensor / torch.sqrt(squared_norm)


# -- gram-ai/capsule-networks capsule_network.py (sizes as arguments) ---------------------------

class CapsuleLayer(nn.Module):
    def __init__(self, num_capsules, num_route_nodes, in_channels, out_channels, kernel_size=None,
                 stride=None, num_iterations=3):
        super().__init__()
        self.num_route_nodes = num_route_nodes
        self.num_iterations = num_iterations
        self.num_capsules = num_capsules
        if num_route_nodes != -1:
            self.route_weights = nn.Parameter(
                torch.randn(num_capsules, num_route_nodes, in_channels, out_channels))
        else:
            self.capsules = nn.ModuleList(
                [nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride,
                           padding=0) for _ in range(num_capsules)])

    def forward(self, x):
        if self.num_route_nodes != -1:
            priors = x[None, :, :, None, :] @ self.route_weights[:, None, :, :, :]
            logits = torch.zeros(*priors.size())
            for i in range(self.num_iterations):
                probs = transposed_softmax(logits, dim=2)
                outputs = squash((probs * priors).sum(dim=2, keepdim=True))
                if i != self.num_iterations - 1:
                    delta_logits = (priors * outputs).sum(dim=-1, keepdim=True)
                    logits = logits + delta_logits
            self.probs = probs
        else:
            outputs = [capsule(x).view(x.size(0), -1, 1) for capsule in self.capsules]
            outputs = torch.cat(outputs, dim=-1)
            outputs = squash(outputs)
        return outputs


class GramAICapsuleNet(nn.Module):
    def __init__(self, channels=1, side=28, filters=16, types=4, dims=8, classes=10,
                 class_dims=16, units=(32, 64), iterations=3):
        super().__init__()
        grid = ((side - 8) - 9) // 2 + 1
        self.classes = classes
        self.conv1 = nn.Conv2d(in_channels=channels, out_channels=filters, kernel_size=9,
                               stride=1)
        self.primary_capsules = CapsuleLayer(num_capsules=dims, num_route_nodes=-1,
                                             in_channels=filters, out_channels=types,
                                             kernel_size=9, stride=2)
        self.digit_capsules = CapsuleLayer(num_capsules=classes,
                                           num_route_nodes=types * grid * grid,
                                           in_channels=dims, out_channels=class_dims,
                                           num_iterations=iterations)
        sizes = [class_dims * classes, *units, side * side * channels]
        layers = []
        for n, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers += [nn.Linear(a, b), nn.ReLU(inplace=True) if n < len(units) else nn.Sigmoid()]
        self.decoder = nn.Sequential(*layers)

    def forward(self, x):
        x = F.relu(self.conv1(x), inplace=True)
        x = self.primary_capsules(x)
        x = self.digit_capsules(x).squeeze().transpose(0, 1)
        lengths = (x ** 2).sum(dim=-1) ** 0.5
        classes = F.softmax(lengths, dim=-1)
        _, max_length_indices = classes.max(dim=1)
        y = torch.eye(self.classes).index_select(dim=0, index=max_length_indices.data)
        # .view() in the source; today's torch keeps x's transposed strides through the product
        reconstructions = self.decoder((x * y[:, :, None]).reshape(x.size(0), -1))
        return x, lengths, reconstructions


# -- the Udacity-style Capsule_Network.ipynb (cezannec/capsule_net_pytorch) ----------------------

class ConvLayer(nn.Module):
    def __init__(self, in_channels=1, out_channels=256):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=9, stride=1, padding=0)

    def forward(self, x):
        return F.relu(self.conv(x))


class PrimaryCaps(nn.Module):
    def __init__(self, num_capsules=8, in_channels=256, out_channels=32):
        super().__init__()
        self.capsules = nn.ModuleList([
            nn.Conv2d(in_channels=in_channels, out_channels=out_channels, kernel_size=9,
                      stride=2, padding=0) for _ in range(num_capsules)])

    def forward(self, x):
        batch_size = x.size(0)
        u = [capsule(x).view(batch_size, -1, 1) for capsule in self.capsules]
        return squash(torch.cat(u, dim=-1))


def dynamic_routing(b_ij, u_hat, routing_iterations=3):
    for iteration in range(routing_iterations):
        c_ij = transposed_softmax(b_ij, dim=2)
        s_j = (c_ij * u_hat).sum(dim=2, keepdim=True)
        v_j = squash(s_j)
        if iteration < routing_iterations - 1:
            a_ij = (u_hat * v_j).sum(dim=-1, keepdim=True)
            b_ij = b_ij + a_ij
    return v_j


class DigitCaps(nn.Module):
    def __init__(self, num_capsules=10, previous_layer_nodes=32 * 6 * 6, in_channels=8,
                 out_channels=16):
        super().__init__()
        self.W = nn.Parameter(torch.randn(num_capsules, previous_layer_nodes, in_channels,
                                          out_channels))

    def forward(self, u):
        u_hat = torch.matmul(u[None, :, :, None, :], self.W[:, None, :, :, :])
        return dynamic_routing(torch.zeros(*u_hat.size()), u_hat, routing_iterations=3)


class Decoder(nn.Module):
    def __init__(self, input_vector_length=16, input_capsules=10, hidden_dim=512, pixels=784):
        super().__init__()
        self.classes = input_capsules
        self.linear_layers = nn.Sequential(
            nn.Linear(input_vector_length * input_capsules, hidden_dim), nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, hidden_dim * 2), nn.ReLU(inplace=True),
            nn.Linear(hidden_dim * 2, pixels), nn.Sigmoid())

    def forward(self, x):
        classes = F.softmax((x ** 2).sum(dim=-1) ** 0.5, dim=-1)
        _, max_length_indices = classes.max(dim=1)
        y = torch.eye(self.classes).index_select(dim=0, index=max_length_indices.data)
        x = x * y[:, :, None]
        return self.linear_layers(x.contiguous().view(x.size(0), -1)), y


class UdacityCapsuleNetwork(nn.Module):
    def __init__(self, filters=16, types=4, hidden=24):
        super().__init__()
        self.conv_layer = ConvLayer(out_channels=filters)
        self.primary_capsules = PrimaryCaps(in_channels=filters, out_channels=types)
        self.digit_capsules = DigitCaps(previous_layer_nodes=types * 6 * 6)
        self.decoder = Decoder(hidden_dim=hidden)

    def forward(self, images):
        caps_output = self.digit_capsules(self.primary_capsules(self.conv_layer(images)))
        caps_output = caps_output.squeeze().transpose(0, 1)
        reconstructions, _ = self.decoder(caps_output)
        return caps_output, (caps_output ** 2).sum(dim=-1) ** 0.5, reconstructions


def _scaled(model, conv=0.1, primary=0.1, route=1.0):
    """Weights that spread the class-capsule lengths over (0, 1) (torch's default init leaves
    them all near 0)."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith(("conv1.", "conv_layer.")) and name.endswith("weight"):
                p.normal_(0, conv)
            elif name.startswith("primary_capsules") and name.endswith("weight"):
                p.normal_(0, primary)
            elif name.endswith(("route_weights", "digit_capsules.W")):
                p.normal_(0, route)
    return model.eval()


def _compare(tmp_path, model, source, x, suffix=".pt", **kwargs):
    state = model.state_dict()
    path = tmp_path / f"epoch_3{suffix}"
    if suffix == ".pt":
        torch.save(state, path)
    else:
        import safetensors.torch as safetensors_torch  # in the test extra
        safetensors_torch.save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    result = import_checkpoint(tmp_path / "models", path, source, **kwargs)
    with torch.no_grad():
        # NCHW with standard strides (a channel axis of size 1 would otherwise keep NumPy's
        # strides, which torch reads as channels-last and then cannot .view())
        nchw = x.transpose(0, 3, 1, 2)
        images = torch.zeros(nchw.shape).copy_(torch.from_numpy(nchw))
        caps, lengths, recon = model(images)
    caps, lengths, recon = caps.numpy(), lengths.numpy(), recon.numpy()
    top2 = np.sort(lengths, 1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0] > 1e-3).all() and lengths.min() > 0.02   # a fair test

    from reportgen.catalog import Catalog

    out = Catalog(tmp_path / "models").load(result.name).model(x)
    np.testing.assert_allclose(out["lengths"].numpy(), lengths, atol=TOLERANCE)
    np.testing.assert_allclose(out["class_capsules"].numpy(), caps, atol=TOLERANCE)
    c = x.shape[-1]
    recon_hwc = recon.reshape(len(x), c, *x.shape[1:3]).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(out["reconstruction"].numpy(), recon_hwc, atol=TOLERANCE)
    return result, out


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_gram_ai_mnist(tmp_path, suffix):
    model = _scaled(GramAICapsuleNet())
    x = np.random.default_rng(1).random((4, 28, 28, 1), dtype=np.float32)
    result, out = _compare(tmp_path, model, "gram-ai", x, suffix)
    assert result.name == "MNIST_GramAI"
    assert result.params.class_caps.routing_softmax == "inputs"
    assert result.params.primary.activation == "none"
    # The couplings are theirs, re-ordered: their capsule type * 36 + cell is our cell * 4 + type.
    probs = model.digit_capsules.probs[..., 0, 0].detach().numpy()      # (classes, B, N)
    cells, types = 36, 4
    order = (np.arange(types)[None, :] * cells + np.arange(cells)[:, None]).reshape(-1)
    np.testing.assert_allclose(out["coupling"].numpy(), probs.transpose(1, 2, 0)[:, order],
                               atol=TOLERANCE)


def test_gram_ai_svhn_color_decoder_is_reordered(tmp_path):
    """capsule_network_svhn.py: 3 channels; the decoder's (C, H, W) pixels become (H, W, C)."""
    model = _scaled(GramAICapsuleNet(channels=3, side=32, filters=8, types=2, classes=5,
                                     class_dims=8, units=(24,), iterations=2))
    x = np.random.default_rng(2).random((3, 32, 32, 3), dtype=np.float32)
    result, _ = _compare(tmp_path, model, "gram-ai", x, dataset="svhn.npz",
                         routing_iterations=2)
    assert result.name == "SVHN_GramAI" and result.params.input_shape == (32, 32, 3)


def test_udacity_notebook(tmp_path):
    model = _scaled(UdacityCapsuleNetwork())
    x = np.random.default_rng(3).random((4, 28, 28, 1), dtype=np.float32)
    result, _ = _compare(tmp_path, model, "udacity", x)
    assert result.name == "MNIST_Udacity"
    assert result.params.decoder.units == (24, 48)


def test_a_gram_ai_file_is_not_a_udacity_file(tmp_path):
    from reportgen.errors import ReportgenError

    path = tmp_path / "epoch_1.pt"
    torch.save(GramAICapsuleNet().state_dict(), path)
    with pytest.raises(ReportgenError, match=r"does not match the udacity layout.*tensor "
                                             r"'conv_layer\.conv\.weight'.*Received no such tensor"):
        import_checkpoint(tmp_path / "models", path, "udacity")


def test_pickled_objects_are_refused(tmp_path):
    from reportgen.errors import ReportgenError

    path = tmp_path / "model.pt"
    torch.save(GramAICapsuleNet(), path)   # the whole model pickled, not its state dict
    with pytest.raises(ReportgenError, match="holds code that reportgen will not run") as info:
        read_checkpoint(path)
    assert "\n" not in info.value.message and "GramAICapsuleNet" in info.value.message
    assert "weights_only=False" not in info.value.message
    # the classic wrappers of a state dict are fine
    torch.save({"epoch": 3, "state_dict": GramAICapsuleNet().state_dict()}, path)
    assert "conv1.weight" in read_checkpoint(path).tensors


@pytest.mark.parametrize("module,net", [(gram_ai, GramAICapsuleNet), (udacity, UdacityCapsuleNetwork)])
def test_full_size_conversion_keeps_every_parameter(module, net):
    """The sources' own MNIST networks at full size (torch's parameter count, no Keras model):
    8,215,568, as reportgen's MNIST baseline."""
    from reportgen.importers.tensors import Checkpoint

    kwargs = {"filters": 256, "types": 32, "units": (512, 1024)} if net is GramAICapsuleNet \
        else {"filters": 256, "types": 32, "hidden": 512}
    with torch.device("meta"):                 # shapes only: nothing allocated, nothing run
        model = net(**kwargs)
    tensors = {k: np.zeros(v.shape, np.float32) for k, v in model.state_dict().items()}
    assert sum(p.numel() for p in model.parameters()) == 8_215_568
    checkpoint = Checkpoint(path=Path("epoch.pt"), format="pytorch",
                            tensors=tensors)
    converted = module.convert(checkpoint)
    params = parse_model_params({"dataset": "mnist", **converted.raw_params})
    assert count_trainable_params(params) == converted.weights.parameter_count == 8_215_568
    assert params.primary.types == 32 and params.primary.dims == 8
    assert converted.weights.class_caps.shape == (1152, 10, 16, 8)
