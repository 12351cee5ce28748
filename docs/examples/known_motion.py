"""Known motion, learned camera: localize a robot from its images with the Kernel Monte Carlo filter.

The motion model (odometry) can be simulated; nobody can write the density of a camera image.
The Kernel Monte Carlo filter samples the motion and learns the image likelihood from (pose,
image) pairs; the particle filter with a nearest-neighbour likelihood and the nearest training
image are the baselines. Each hyperparameter is the value tuning chose most often at 1,000 poses
(``kb.tune_filter`` finds them for other data; ``kbfilter bench localization`` compares them over
many runs and draws the room from above).
"""

import kbfilter as kb

robot = kb.systems.RobotInRoom()                        # 16 x 64 RGB camera, blurred by the filters
poses, odometry, images = robot.simulate(1000, rng=0)   # odometry[t] moved the robot to poses[t]
test_poses, test_odometry, test_images = robot.simulate(100, rng=1)

filters = {
    "KMC": kb.KernelMonteCarloFilter(robot, resample="ratio", scale=0.2, scale_z=0.1, reg_prior=1e-2,
                                     reg_update=1e-3, outlier_quantile=0.99, random_state=0),
    "nearest-neighbour PF": kb.filters.NearestNeighbourParticleFilter(robot, n_neighbors=3, scale=0.1,
                                                                      outlier_quantile=0.99, random_state=0),
    "nearest image": kb.filters.NearestImage(),
}
for name, filt in filters.items():
    filt.fit(poses, images)
    means = filt.batch_filter(test_images, us=test_odometry)[0]    # rows: (x, y, cos heading, sin heading)
    errors = robot.errors(means, test_poses)
    print(f"{name:>22}: position MSE {errors['mse']:.3f}, heading error {errors['heading_error_deg']:.1f} deg")
print("test images set aside as unlike every training image:", filters["KMC"].diagnostics["outlier"])
