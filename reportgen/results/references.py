"""BibTeX: the entries reportgen's own families and techniques cite, and the helpers every
citation goes through.

A family and a technique declare their references themselves, as BibTeX entries
(`Family.citations`, `Technique.citations`; reportgen.bibtex reads them); the pages' "About the
methods", the model pages and the supplement's references.bib cite what they declare, and
nothing else: a plug-in without a citation shows none. `cite(*keys)` picks entries of the
library below for reportgen's own declarations; a data set's paper is found from its
description (`dataset_entries`). Every entry is complete, from the paper's own metadata (a
test compiles the supplement's bibliography with BibTeX and reads its warnings).
"""

from __future__ import annotations

ENTRIES = {
    "pearson1901lines": """@article{pearson1901lines,
  author    = {Pearson, Karl},
  title     = {On Lines and Planes of Closest Fit to Systems of Points in Space},
  journal   = {The London, Edinburgh, and Dublin Philosophical Magazine and Journal of Science},
  volume    = {2},
  number    = {11},
  pages     = {559--572},
  year      = {1901},
  doi       = {10.1080/14786440109462720}
}""",
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
    "hahn2019self": """@inproceedings{hahn2019self,
  author    = {Hahn, Taeyoung and Pyeon, Myeongjang and Kim, Gunhee},
  title     = {Self-Routing Capsule Networks},
  booktitle = {Advances in Neural Information Processing Systems 32 (NeurIPS 2019)},
  pages     = {7658--7667},
  year      = {2019}
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
    "bhullar2020rpv": """@article{bhullar2020rpv,
  author    = {Bhullar, Amanjot and Czomko, Michael and Ali, R. Ayesha and Welch, Douglas L.},
  title     = {Interpreting Capsule Networks for Image Classification by Routing Path
               Visualization},
  journal   = {Artificial Intelligence},
  volume    = {348},
  pages     = {104395},
  year      = {2025},
  doi       = {10.1016/j.artint.2025.104395},
  note      = {The original Routing Path Visualization, $m = l_i (c_{ij} l_j)^2$, first
               circulated as a preprint in 2020; the modified method drops the square}
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
    "bhatt2020evaluating": """@inproceedings{bhatt2020evaluating,
  author    = {Bhatt, Umang and Weller, Adrian and Moura, Jos{\\'e} M. F.},
  title     = {Evaluating and Aggregating Feature-based Model Explanations},
  booktitle = {Proceedings of the Twenty-Ninth International Joint Conference on Artificial
               Intelligence (IJCAI-20)},
  pages     = {3016--3022},
  year      = {2020},
  eprint    = {2005.00631},
  archivePrefix = {arXiv}
}""",
    "rong2022consistent": """@inproceedings{rong2022consistent,
  author    = {Rong, Yao and Leemann, Tobias and Borisov, Vadim and Kasneci, Gjergji and
               Kasneci, Enkelejda},
  title     = {A Consistent and Efficient Evaluation Strategy for Attribution Methods},
  booktitle = {Proceedings of the 39th International Conference on Machine Learning (ICML)},
  series    = {Proceedings of Machine Learning Research},
  volume    = {162},
  year      = {2022},
  eprint    = {2202.00449},
  archivePrefix = {arXiv}
}""",
    "adebayo2018sanity": """@inproceedings{adebayo2018sanity,
  author    = {Adebayo, Julius and Gilmer, Justin and Muelly, Michael and Goodfellow, Ian and
               Hardt, Moritz and Kim, Been},
  title     = {Sanity Checks for Saliency Maps},
  booktitle = {Advances in Neural Information Processing Systems 31 (NeurIPS 2018)},
  pages     = {9505--9515},
  year      = {2018},
  eprint    = {1810.03292},
  archivePrefix = {arXiv}
}""",
    "wang2004ssim": """@article{wang2004ssim,
  author    = {Wang, Zhou and Bovik, Alan C. and Sheikh, Hamid R. and Simoncelli, Eero P.},
  title     = {Image Quality Assessment: From Error Visibility to Structural Similarity},
  journal   = {IEEE Transactions on Image Processing},
  volume    = {13},
  number    = {4},
  pages     = {600--612},
  year      = {2004},
  doi       = {10.1109/TIP.2003.819861}
}""",
    "sixt2020explanations": """@inproceedings{sixt2020explanations,
  author    = {Sixt, Leon and Granz, Maximilian and Landgraf, Tim},
  title     = {When Explanations Lie: Why Many Modified {BP} Attributions Fail},
  booktitle = {Proceedings of the 37th International Conference on Machine Learning (ICML)},
  pages     = {9046--9057},
  year      = {2020},
  eprint    = {1912.09818},
  archivePrefix = {arXiv}
}""",
    "yeh2019fidelity": """@inproceedings{yeh2019fidelity,
  author    = {Yeh, Chih-Kuan and Hsieh, Cheng-Yu and Suggala, Arun Sai and Inouye, David I.
               and Ravikumar, Pradeep},
  title     = {On the (In)fidelity and Sensitivity of Explanations},
  booktitle = {Advances in Neural Information Processing Systems 32 (NeurIPS 2019)},
  year      = {2019},
  eprint    = {1901.09392},
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
    "gu2018clrp": """@inproceedings{gu2018clrp,
  author    = {Gu, Jindong and Yang, Yinchong and Tresp, Volker},
  title     = {Understanding Individual Decisions of {CNNs} via Contrastive Backpropagation},
  booktitle = {Computer Vision -- ACCV 2018, 14th Asian Conference on Computer Vision},
  series    = {Lecture Notes in Computer Science},
  volume    = {11363},
  pages     = {119--134},
  publisher = {Springer},
  year      = {2018},
  doi       = {10.1007/978-3-030-20893-6_8},
  eprint    = {1812.02100},
  archivePrefix = {arXiv}
}""",
    "bach2015lrp": """@article{bach2015lrp,
  author    = {Bach, Sebastian and Binder, Alexander and Montavon, Gr{\\'e}goire and
               Klauschen, Frederick and M{\\"u}ller, Klaus-Robert and Samek, Wojciech},
  title     = {On Pixel-Wise Explanations for Non-Linear Classifier Decisions by Layer-Wise
               Relevance Propagation},
  journal   = {PLoS ONE},
  volume    = {10},
  number    = {7},
  pages     = {e0130140},
  year      = {2015},
  doi       = {10.1371/journal.pone.0130140}
}""",
    "montavon2017dtd": """@article{montavon2017dtd,
  author    = {Montavon, Gr{\\'e}goire and Lapuschkin, Sebastian and Binder, Alexander and
               Samek, Wojciech and M{\\"u}ller, Klaus-Robert},
  title     = {Explaining Nonlinear Classification Decisions with Deep {Taylor} Decomposition},
  journal   = {Pattern Recognition},
  volume    = {65},
  pages     = {211--222},
  year      = {2017},
  doi       = {10.1016/j.patcog.2016.11.008}
}""",
    "zhang2016excitation": """@inproceedings{zhang2016excitation,
  author    = {Zhang, Jianming and Lin, Zhe and Brandt, Jonathan and Shen, Xiaohui and
               Sclaroff, Stan},
  title     = {Top-Down Neural Attention by Excitation Backprop},
  booktitle = {Computer Vision -- ECCV 2016},
  series    = {Lecture Notes in Computer Science},
  volume    = {9908},
  pages     = {543--559},
  publisher = {Springer},
  year      = {2016},
  doi       = {10.1007/978-3-319-46493-0_33}
}""",
    "arras2022clevr": """@article{arras2022clevr,
  author    = {Arras, Leila and Osman, Ahmed and Samek, Wojciech},
  title     = {{CLEVR-XAI}: A benchmark dataset for the ground truth evaluation of neural network
               explanations},
  journal   = {Information Fusion},
  volume    = {81},
  pages     = {14--40},
  year      = {2022},
  doi       = {10.1016/j.inffus.2021.11.008}
}""",
    "simonyan2014deep": """@inproceedings{simonyan2014deep,
  author    = {Simonyan, Karen and Vedaldi, Andrea and Zisserman, Andrew},
  title     = {Deep Inside Convolutional Networks: Visualising Image Classification Models and
               Saliency Maps},
  booktitle = {International Conference on Learning Representations (ICLR), Workshop Track},
  year      = {2014},
  eprint    = {1312.6034},
  archivePrefix = {arXiv}
}""",
}

# a word of the data set's description -> its paper (first match wins)
DATASETS = (("fashion", "xiao2017fashion"), ("mnist", "lecun1998gradient"),
            ("cifar", "krizhevsky2009learning"), ("norb", "lecun2004learning"))


def cite(*keys: str) -> tuple[str, ...]:
    """The library's entries of `keys` (for a declaration's `citations`); KeyError names an
    unknown key."""
    return tuple(ENTRIES[k] for k in keys)


def dataset_entries(description: str) -> tuple[str, ...]:
    """The paper of a data set, from its description ("MNIST (5,000 bundled digits)")."""
    text = description.lower()
    return next((cite(key) for word, key in DATASETS if word in text), ())
