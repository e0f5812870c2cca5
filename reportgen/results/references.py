"""BibTeX entries of the methods, model families and data sets a supplement's figures use.

`cited(techniques, kinds, datasets)` picks the keys: every technique, model kind (Gu 2022's
names, reportgen.results.capsules_vs_cnns.model_kind) and data set maps to the papers it comes
from. Only entries whose details are known are complete; an entry reportgen cannot complete
says so in its `note`.
"""

from __future__ import annotations

ENTRIES = {
    "sabour2017dynamic": """@inproceedings{sabour2017dynamic,
  author    = {Sabour, Sara and Frosst, Nicholas and Hinton, Geoffrey E.},
  title     = {Dynamic Routing Between Capsules},
  booktitle = {Advances in Neural Information Processing Systems 30 (NIPS 2017)},
  pages     = {3856--3866},
  year      = {2017},
  eprint    = {1710.09829},
  archivePrefix = {arXiv}
}""",
    "hinton2018matrix": """@inproceedings{hinton2018matrix,
  author    = {Hinton, Geoffrey E. and Sabour, Sara and Frosst, Nicholas},
  title     = {Matrix Capsules with {EM} Routing},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2018},
  url       = {https://openreview.net/forum?id=HJWLfGWRb}
}""",
    "chattopadhay2018gradcampp": """@inproceedings{chattopadhay2018gradcampp,
  author    = {Chattopadhay, Aditya and Sarkar, Anirban and Howlader, Prantik and
               Balasubramanian, Vineeth N.},
  title     = {Grad-{CAM}++: Generalized Gradient-Based Visual Explanations for Deep
               Convolutional Networks},
  booktitle = {IEEE Winter Conference on Applications of Computer Vision (WACV)},
  pages     = {839--847},
  year      = {2018},
  doi       = {10.1109/WACV.2018.00097}
}""",
    "bhullar2020rpv": """@misc{bhullar2020rpv,
  author    = {Bhullar},
  title     = {Routing Path Visualization of Capsule Networks},
  year      = {2020},
  note      = {The original Routing Path Visualization, $m = l_i (c_{ij} l_j)^2$; the modified
               method drops the square. reportgen does not know this source's full details:
               complete the entry from the copy you cite}
}""",
    "gu2022explainability": """@phdthesis{gu2022explainability,
  author    = {Gu, Jindong},
  title     = {Explainability and Robustness of Deep Visual Classification Models},
  school    = {Ludwig-Maximilians-Universit{\\"a}t M{\\"u}nchen},
  year      = {2022},
  eprint    = {2301.01343},
  archivePrefix = {arXiv}
}""",
    "gu2021capsule": """@inproceedings{gu2021capsule,
  author    = {Gu, Jindong and Tresp, Volker and Hu, Han},
  title     = {Capsule Network is Not More Robust than Convolutional Network},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2021}
}""",
    "gu2021graph": """@inproceedings{gu2021graph,
  author    = {Gu, Jindong and Wu, Baoyuan and Tresp, Volker},
  title     = {Interpretable Graph Capsule Networks for Object Recognition},
  booktitle = {Proceedings of the AAAI Conference on Artificial Intelligence},
  year      = {2021},
  eprint    = {2012.01674},
  archivePrefix = {arXiv}
}""",
    "goodfellow2015explaining": """@inproceedings{goodfellow2015explaining,
  author    = {Goodfellow, Ian J. and Shlens, Jonathon and Szegedy, Christian},
  title     = {Explaining and Harnessing Adversarial Examples},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2015},
  eprint    = {1412.6572},
  archivePrefix = {arXiv}
}""",
    "madry2018towards": """@inproceedings{madry2018towards,
  author    = {Madry, Aleksander and Makelov, Aleksandar and Schmidt, Ludwig and
               Tsipras, Dimitris and Vladu, Adrian},
  title     = {Towards Deep Learning Models Resistant to Adversarial Attacks},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2018},
  eprint    = {1706.06083},
  archivePrefix = {arXiv}
}""",
    "petsiuk2018rise": """@inproceedings{petsiuk2018rise,
  author    = {Petsiuk, Vitali and Das, Abir and Saenko, Kate},
  title     = {{RISE}: Randomized Input Sampling for Explanation of Black-box Models},
  booktitle = {British Machine Vision Conference (BMVC)},
  year      = {2018},
  eprint    = {1806.07421},
  archivePrefix = {arXiv}
}""",
    "samek2017evaluating": """@article{samek2017evaluating,
  author    = {Samek, Wojciech and Binder, Alexander and Montavon, Gr{\\'e}goire and
               Lapuschkin, Sebastian and M{\\"u}ller, Klaus-Robert},
  title     = {Evaluating the Visualization of What a Deep Neural Network Has Learned},
  journal   = {IEEE Transactions on Neural Networks and Learning Systems},
  volume    = {28},
  number    = {11},
  pages     = {2660--2673},
  year      = {2017},
  doi       = {10.1109/TNNLS.2016.2599820}
}""",
    "erhan2009visualizing": """@techreport{erhan2009visualizing,
  author    = {Erhan, Dumitru and Bengio, Yoshua and Courville, Aaron and Vincent, Pascal},
  title     = {Visualizing Higher-Layer Features of a Deep Network},
  institution = {University of Montreal},
  number    = {1341},
  year      = {2009}
}""",
    "lecun1998gradient": """@article{lecun1998gradient,
  author    = {LeCun, Yann and Bottou, L{\\'e}on and Bengio, Yoshua and Haffner, Patrick},
  title     = {Gradient-Based Learning Applied to Document Recognition},
  journal   = {Proceedings of the IEEE},
  volume    = {86},
  number    = {11},
  pages     = {2278--2324},
  year      = {1998}
}""",
    "xiao2017fashion": """@misc{xiao2017fashion,
  author    = {Xiao, Han and Rasul, Kashif and Vollgraf, Roland},
  title     = {Fashion-{MNIST}: a Novel Image Dataset for Benchmarking Machine Learning
               Algorithms},
  year      = {2017},
  eprint    = {1708.07747},
  archivePrefix = {arXiv}
}""",
    "krizhevsky2009learning": """@techreport{krizhevsky2009learning,
  author    = {Krizhevsky, Alex},
  title     = {Learning Multiple Layers of Features from Tiny Images},
  institution = {University of Toronto},
  year      = {2009}
}""",
    "lecun2004learning": """@inproceedings{lecun2004learning,
  author    = {LeCun, Yann and Huang, Fu Jie and Bottou, L{\\'e}on},
  title     = {Learning Methods for Generic Object Recognition with Invariance to Pose and
               Lighting},
  booktitle = {IEEE Computer Society Conference on Computer Vision and Pattern Recognition
               (CVPR)},
  year      = {2004}
}""",
}

# technique -> the papers of the method (and of the protocol it follows)
TECHNIQUES = {
    "gradcam_pp": ("chattopadhay2018gradcampp",),
    "rpv": ("bhullar2020rpv",),
    "decoder_length": ("sabour2017dynamic",),
    "decoder_perturbation": ("sabour2017dynamic",),
    "activation_maximization": ("erhan2009visualizing",),
    "gracaps_attention": ("gu2021graph",),
    "routing_entropy": ("sabour2017dynamic",),
    "vote_agreement": ("sabour2017dynamic",),
    "capsule_semantics": ("sabour2017dynamic", "gu2022explainability"),
    "explanation_fidelity": ("petsiuk2018rise", "samek2017evaluating",
                             "chattopadhay2018gradcampp", "bhullar2020rpv"),
    "affine_robustness": ("sabour2017dynamic", "gu2022explainability"),
    "adversarial_robustness": ("goodfellow2015explaining", "madry2018towards",
                               "gu2022explainability"),
    "affnist_benchmark": ("gu2021capsule", "gu2022explainability"),
    "multimnist_pair": ("sabour2017dynamic",),
    "multimnist_segmentation": ("sabour2017dynamic", "gu2022explainability"),
}
# model kind -> the papers of its architecture
KINDS = {
    "CapsNet": ("sabour2017dynamic",),
    "CapsNet-NoR": ("sabour2017dynamic", "gu2021capsule", "gu2022explainability"),
    "Aff-CapsNet": ("sabour2017dynamic", "gu2021capsule", "gu2022explainability"),
    "Aff-CapsNet-DR": ("sabour2017dynamic", "gu2021capsule", "gu2022explainability"),
    "EM-CapsNet": ("hinton2018matrix",),
    "GraCapsNet": ("gu2021graph",),
}
# a word of the data set's description -> its paper (first match wins)
DATASETS = (("fashion", "xiao2017fashion"), ("mnist", "lecun1998gradient"),
            ("cifar", "krizhevsky2009learning"), ("norb", "lecun2004learning"))


def technique_keys(technique: str) -> tuple[str, ...]:
    return TECHNIQUES.get(technique, ())


def kind_keys(kind: str) -> tuple[str, ...]:
    if kind.startswith("ConvNet"):
        return ("gu2021capsule", "gu2022explainability")
    return KINDS.get(kind, ("sabour2017dynamic",))


def dataset_keys(description: str) -> tuple[str, ...]:
    text = description.lower()
    return next(((key,) for word, key in DATASETS if word in text), ())


def bibtex(keys) -> str:
    """The entries of `keys` (unknown keys skipped), sorted by key, as one .bib text."""
    chosen = sorted({k for k in keys if k in ENTRIES})
    return "".join(ENTRIES[k] + "\n\n" for k in chosen)
