"""OWL-ViT falls back to generalized IoU when no predicted box overlaps the query box, and
generalized IoU checks its boxes with data-dependent raises: breaks on a path the example (boxes
that overlap) does not take.

Source: transformers/models/owlvit/modeling_owlvit.py, OwlViTForObjectDetection.embed_image_query
(transformers 5.23.0, line 1271): `if torch.all(ious[0] == 0.0): ious =
generalized_box_iou(each_query_box, each_query_pred_boxes)`; box_iou and generalized_box_iou
(lines 130 and 147, "Copied from transformers.loss.loss_for_object_detection"), with `if not
(boxes1[:, 2:] >= boxes1[:, :2]).all(): raise ValueError(...)`.
"""
import torch

import unbroken


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    left_top = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N,M,2]
    right_bottom = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N,M,2]
    width_height = (right_bottom - left_top).clamp(min=0)  # [N,M,2]
    inter = width_height[:, :, 0] * width_height[:, :, 1]  # [N,M]
    union = area1[:, None] + area2 - inter
    iou = inter / union
    return iou, union


def generalized_box_iou(boxes1, boxes2):
    # degenerate boxes gives inf / nan results
    # so do an early check
    if not (boxes1[:, 2:] >= boxes1[:, :2]).all():
        raise ValueError(f"boxes1 must be in [x0, y0, x1, y1] (corner) format, but got {boxes1}")  # noqa: E501
    if not (boxes2[:, 2:] >= boxes2[:, :2]).all():
        raise ValueError(f"boxes2 must be in [x0, y0, x1, y1] (corner) format, but got {boxes2}")  # noqa: E501
    iou, union = box_iou(boxes1, boxes2)
    top_left = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    bottom_right = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    width_height = (bottom_right - top_left).clamp(min=0)  # [N,M,2]
    area = width_height[:, :, 0] * width_height[:, :, 1]
    return iou - (area - union) / area


class QueryBoxIou(torch.nn.Module):
    def forward(self, pred_boxes):
        each_query_box = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
        ious, _ = box_iou(each_query_box, pred_boxes)
        # If there are no overlapping boxes, fall back to generalized IoU
        if torch.all(ious[0] == 0.0):
            ious = generalized_box_iou(each_query_box, pred_boxes)
        iou_threshold = torch.max(ious) * 0.8
        return ious[0] >= iou_threshold


unbroken.case(QueryBoxIou(), (torch.tensor([[0.1, 0.1, 0.6, 0.5], [0.5, 0.2, 0.9, 0.9],
                                            [0.0, 0.3, 0.4, 1.0]]),))
