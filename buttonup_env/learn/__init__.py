"""Learning with torch: the policy network, its active-feature first layer, Stable-Baselines3 on
the batched env, and the ONNX writer."""
