# Sourced by the experiment scripts whose recorded results were measured on the default
# config as it was then: 6 blocks without drop path or patch dropout, a CLS token, peak
# learning rate 2e-3, fp32 products. Given after --config configs/fashion_mnist.toml (and before a script's own
# --set, which win), they rebuild that model however the config file has moved on since.
study_model=(--set model.depth=6 --set model.drop_path=0 --set model.patch_drop=0 --set model.pool=cls
             --set optim.lr=2e-3 --set train.precision=fp32)
