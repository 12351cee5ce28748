"""The library's default hyperparameter grids: what each filter's ``default_grid`` picks from.

Each grid maps a filter parameter to the candidate values :func:`~kbfilter.tune_filter` searches.
The comments say where each range was measured (the documentation's studies have the tables).
"""

__all__ = ["DEFAULT_GRID", "SCALABLE_GRID", "IMAGE_GRID", "FEATURE_GRID", "BLUR_GRID", "SCALABLE_BLUR_GRID",
           "MONTE_CARLO_IMAGE_GRID", "MONTE_CARLO_SCALABLE_IMAGE_GRID", "NEIGHBOUR_GRID", "NEAREST_IMAGE_GRID",
           "LOCAL_GRID", "LOCAL_BLUR_GRID"]

#: vector observations: bandwidth scale 0.1-4, both regularisers 1e-6-1
DEFAULT_GRID = {
    "scale": (0.1, 0.25, 0.5, 1.0, 2.0, 4.0),
    "reg_prior": (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0),
    "reg_update": (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0),
}
#: the scalable (low-rank) filter on long training runs: the narrowest bandwidth of DEFAULT_GRID
#: (0.1 x median) needs more than a thousand landmarks at T >= 10^4, so this grid starts at 0.25
SCALABLE_GRID = dict(DEFAULT_GRID, scale=(0.25, 0.5, 1.0, 2.0, 4.0))
#: the filter on a bounded support (``approximation="local"``): narrow bandwidths cost nothing more
#: there (no landmarks, a step of the same cost), so the grid reaches 0.05 x median. ``reg_prior``
#: stays: it is also the transition's regulariser (``reg_transition=None``)
LOCAL_GRID = dict(DEFAULT_GRID, scale=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0))
#: raw pixels want a narrow observation kernel (image noise puts a floor under image distances)
#: and the validation error is not monotone in it, so the image grid is finer and reaches 0.05
IMAGE_GRID = {
    "scale": (0.1, 0.2, 0.35, 0.5, 1.0),
    "scale_z": (0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3, 0.5, 1.0),
    "reg_prior": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
    "reg_update": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
}
#: images through PCA or learned features
FEATURE_GRID = dict(IMAGE_GRID, scale_z=(0.25, 0.5, 1.0, 2.0))
#: blurred images keep less noise in their distances, so the good observation bandwidths sit a
#: little higher than on raw pixels (0.15-0.2 x median measured), and the grid reaches 2
BLUR_GRID = dict(IMAGE_GRID, scale_z=(0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0))
#: ... and on a bounded support (``approximation="local"``; long logs of images): the state
#: bandwidth reaches 0.05 x median, as on vectors, because a narrow state kernel costs nothing more
#: there; on the moving sprite the tuned scale fell from 1.0 at 10^3 frames to 0.05 at 10^4
LOCAL_BLUR_GRID = dict(BLUR_GRID, scale=(0.05, 0.1, 0.2, 0.35, 0.5, 1.0))
#: ... and on Nystrom kernels (long logs, where every evaluation fits thousands of images): a
#: coarser grid over the values the exact filter's tuning chose on the robot room at 1,000 poses
SCALABLE_BLUR_GRID = {"scale": (0.5, 1.0), "scale_z": (0.2, 0.5, 1.0), "reg_prior": (1e-4, 1e-2),
                      "reg_update": (1e-3, 1e-1)}
#: the Kernel Monte Carlo filter on images: every evaluation runs a thousand particles, so the
#: grid is coarser; its observation bandwidths reach down to 0.02 x median, because on the robot
#: room a sharp image likelihood kept the weighted particles on track where 0.1 x median lost them
MONTE_CARLO_IMAGE_GRID = {"scale": (0.1, 0.2, 0.5), "scale_z": (0.02, 0.05, 0.1, 0.2, 0.5, 1.0),
                          "reg_prior": (1e-3, 1e-2, 1e-1), "reg_update": (1e-3, 1e-2, 1e-1)}
#: ... and on Nystrom kernels, for long logs where every evaluation fits thousands of images: the
#: regulariser of the prior is fixed at the value the exact filter's tuning chose most often
MONTE_CARLO_SCALABLE_IMAGE_GRID = {"scale": (0.2, 0.5), "scale_z": (0.05, 0.1, 0.2, 0.5), "reg_prior": (1e-2,),
                                   "reg_update": (1e-2, 1e-1)}
#: the nearest-neighbour particle filter: neighbours voting, and their bandwidth (x median)
NEIGHBOUR_GRID = {"n_neighbors": (1, 3, 10, 30), "scale": (0.02, 0.05, 0.1, 0.2, 0.5)}
#: the nearest image: how many of the nearest training images' states are averaged
NEAREST_IMAGE_GRID = {"n_neighbors": (1, 3, 10, 30)}
