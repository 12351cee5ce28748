"""Track a sprite from 64 x 64 noisy images: the filter blurs image observations by default."""

import numpy as np

import kbfilter as kb

system = kb.systems.MovingSprite()
states, images = system.simulate(400, rng=0)               # images: (400, 64, 64)
kbf = kb.KernelBayesFilter(scale_z=0.2, reg_prior=1e-2, reg_update=1e-2).fit(states, images)
print("feature map:", kbf.features_)
test_states, test_images = system.simulate(50, rng=1)
means = kbf.batch_filter(test_images)[0]
print("MSE:", np.mean(np.sum((means - test_states) ** 2, axis=1)))
