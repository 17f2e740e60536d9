"""Visual quality of synthetic images (paper ``tab:visual``, ``tab:full_image``).

``scores``
    Inception Score from class probabilities and the Fréchet distance between two Gaussians
    fitted to features (float64) -- the formulas, independent of any network.
``classifier``
    The *domain classifiers*: one small CNN per dataset, trained by this repository on the
    real training set, its weights committed with a SHA-256 and its test accuracy recorded.
    "IS (domain classifier)" uses its softmax, "FID (domain features)" its penultimate layer.
``inception``
    Inception-based IS/FID through torch-fidelity, when the user supplies the Inception
    weights file (it cannot be downloaded here).

The paper computes IS with pretrained MNIST/Fashion classifiers that were never published and
FID with ImageNet Inception features; our domain-classifier numbers are therefore on another
scale: compare rankings and the real-data reference row, not absolute values.
"""

from .classifier import DomainClassifier, load_domain_classifier, score_images
from .scores import frechet_distance, gaussian_stats, inception_score

__all__ = ["DomainClassifier", "load_domain_classifier", "score_images", "frechet_distance",
           "gaussian_stats", "inception_score"]
