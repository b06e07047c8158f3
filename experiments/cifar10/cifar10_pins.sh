# Sourced by the CIFAR-10 lever scripts (cifar10_levers.sh, cifar10_fast_levers.sh,
# cifar10_hour_levers.sh): the --set pins their recipes share, so that each script states
# only where its recipe differs. A variant's own keys come after these; of two --set of one
# key, train takes the later. How often a run validates (train.eval_every) is left to the
# config: it changes no weight, only which epochs a run's log shows.

# Every lever run: 4x4 patches (64 tokens), 4 heads, scaled-dot attention, learned
# positions, a 32-channel stem where there is one, no dropout; half the patches dropped;
# AdamW (lr 2e-3, weight decay 0.05, 500 warm-up steps then a cosine schedule to 1e-5,
# gradients clipped at norm 1), batch 128; 4-pixel padded crops and flips, no TrivialAugment,
# random erasing, mixing or label smoothing; 10% of the training images for validation; fp32
# products; seed 0.
cifar10_pins=(--set model.patch_size=4 --set model.heads=4 --set model.attention=scaled_dot
              --set model.pos_embed=learned --set model.dropout=0
              --set model.attention_dropout=0 --set model.stem_channels=32
              --set model.patch_drop=0.5
              --set optim.lr=2e-3 --set optim.weight_decay=0.05 --set optim.warmup_steps=500
              --set optim.schedule=cosine --set optim.min_lr=1e-5 --set optim.clip_grad_norm=1.0
              --set optim.label_smoothing=0 --set data.crop_padding=4 --set data.hflip=0.5
              --set data.auto_augment=none --set data.erasing=0 --set data.mixup=0
              --set data.cutmix=0 --set data.augment=true
              --set data.val_fraction=0.1 --set train.batch_size=128 --set train.precision=fp32
              --set train.seed=0)

# The model both configs held until commit a0ecfd3: the conv stem into 64 tokens of width
# 64, 4 blocks, MLP 128, mean pooling.
cifar10_a0ecfd3_model=(--set model.patch_embed=conv --set model.dim=64 --set model.depth=4
                       --set model.mlp_dim=128 --set model.pool=mean)
